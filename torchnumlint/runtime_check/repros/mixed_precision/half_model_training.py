"""TNL304 half-model-training: a module cast to float16 and trained computes its loss in float16,
which is Inf above 65504.

A check of its own (the rule is a guide, with no fix to run): the example's train_step (a
`Linear(64, 1).half()` trained with SGD) gives an Inf `mse_loss` against targets of 300; the
rule's first good snippet, the same step with float32 weights, gives the finite loss (above 65504).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import Repro, ReproContext
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, Result
from torchnumlint.runtime_check.repros.inputs import gen


def check(ctx: ReproContext) -> Result:
    g = gen(304)
    x = torch.randn(8, 64, generator=g).to(ctx.device)
    y = torch.full((8, 1), 300.0).to(ctx.device)
    evidence, numbers = [], {}
    torch.manual_seed(304)
    bad = oracles.run("original", lambda: ctx.load("bad")(x, y), {}, ())
    if not bad.ok:
        return ctx.result(NOT_REPRODUCED, evidence=[bad.describe()], reason="the original raised")
    assert bad.out is not None  # the step returns its loss
    loss_bad = float(bad.out)
    numbers["original_loss"] = loss_bad
    evidence.append(f"float16 model: mse_loss = {loss_bad} ({bad.out.dtype})")
    torch.manual_seed(304)
    good = oracles.run("float32 weights", lambda: ctx.load("good")(x, y), {}, ())
    if not good.ok:
        return ctx.result(FIX_FAILED, evidence=evidence + [good.describe()], reason="the float32 step raised")
    assert good.out is not None  # the step returns its loss
    loss_good = float(good.out)
    numbers["float32_loss"] = loss_good
    evidence.append(f"float32 weights (good snippet): mse_loss = {loss_good:.6g}")
    if torch.isfinite(torch.tensor(loss_bad)):
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="the float16 loss is finite")
    if not (65504 < loss_good < float("inf")):
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers,
                          reason="the float32 loss is not the finite value above float16's range")
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


REPRO = Repro(
    "TNL304", "NF", "train_step", ("float16",),
    thresholds={"*": "Linear(64, 1), x 8 x 64 randn, targets 300: (300)^2 > 65504"},
    fixed_from="good", custom=check,
)
