"""TNL302 fp16-without-grad-scaler: a backward under float16 autocast without a GradScaler lets small
gradients underflow to exactly 0.

A ZG check of its own: the example's train_step (fp16 autocast, backward without a scaler) returns
a weight gradient that is exactly 0 everywhere; the rule's first good snippet (`fit`, with
torch.amp.GradScaler) trains the same loss and its unscaled gradient is not 0.
"""

from __future__ import annotations

from typing import Dict, List

import torch

from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import Repro, ReproContext
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, Result
from torchnumlint.runtime_check.repros.inputs import gen


def check(ctx: ReproContext) -> Result:
    g = gen(302)
    x = torch.randn(8, 64, generator=g).to(ctx.device)
    w0 = (torch.randn(64, 64, generator=g) * 0.1).to(ctx.device)
    evidence: List[str] = []
    numbers: Dict[str, object] = {}

    w = w0.clone().requires_grad_(True)
    bad = oracles.run("original", lambda: ctx.load("bad")(w, x), {}, ())
    if not bad.ok:
        return ctx.result(NOT_REPRODUCED, evidence=[bad.describe()], reason="the original raised")
    zb = oracles.zero_count("original w.grad", bad.out)
    numbers["original"] = zb
    evidence.append(f"without a scaler: {zb.describe()}")

    # the fixed side: the good snippet's fit(model, loader, optimizer, loss_fn) on the same loss
    w2 = w0.clone().requires_grad_(True)

    def loss_fn(out, _y):
        w2.grad = None  # the snippet accumulates; keep each step's gradient alone
        return out.sum() * 1e-9

    opt = torch.optim.SGD([w2], lr=0.0)  # lr 0: the step leaves w unchanged, the gradient is kept
    fit = ctx.load("good", "fit")
    loader = [(x, None)] * 4  # GradScaler skips overflowing steps and backs its scale off
    fixed = oracles.run("fix", lambda: fit(lambda inp: inp @ w2, loader, opt, loss_fn) or w2.grad, {}, ())
    if not fixed.ok or w2.grad is None:
        return ctx.result(FIX_FAILED, evidence=evidence + [fixed.describe()], reason="the scaled run failed")
    zf = oracles.zero_count("GradScaler w.grad", w2.grad)
    fin = oracles.count("GradScaler w.grad", w2.grad)
    numbers["fix"], numbers["fix_counts"] = zf, fin
    evidence.append(f"with torch.amp.GradScaler (good snippet fit(), 4 steps): {zf.describe()}; {fin.describe()}")
    expected = (x.t() @ torch.ones(8, 64, device=ctx.device)).double() * 1e-9
    numbers["expected_max_abs_grad"] = float(expected.abs().max())
    err = oracles.diff("w.grad", w2.grad, expected)
    numbers["fix_vs_true_gradient"] = err
    evidence.append(f"true gradient (float64): max |dL/dw| {float(expected.abs().max()):.3g}; GradScaler w.grad vs it: rel {err.rel:.3g}")
    if zb.zeros == 0:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="no gradient is exactly 0")
    if zf.zeros >= zb.zeros or not fin.finite:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="with the scaler the gradients are still 0 or not finite")
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


REPRO = Repro(
    "TNL302",
    "ZG",
    "train_step",
    ("autocast",),
    thresholds={"*": "w 64 x 64, x 8 x 64, loss = (x @ w).sum() * 1e-9 under float16 autocast"},
    fixed_from="good",
    custom=check,
)
