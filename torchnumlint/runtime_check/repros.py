"""One reproduction per rule code: the hazard of the rule's FIRST example, on a real device.

A `Repro` names the function the first example defines, the oracle of the catalogue (NF, ERR, WV,
ZG, WARN for "(warning)"), the dtypes it runs in, and builders for adversarial inputs (built at the
measured hazard threshold of that dtype) and benign inputs (where the original is fine and a SAFE
fix must give the same values). The generic checks in `runner.py` run the example's `bad` text and
its pinned `fixed` text; a rule whose hazard is not a function of tensors (a training step, a
deprecated API) has a `custom` check instead.

Inputs are built on the CPU from a fixed seed and then moved, so every device sees the same numbers.

Adding a rule: write its entry here (the test `test_every_rule_has_a_reproduction` fails until
then), run `python -m torchnumlint.runtime_check --select TNLxxx --device cpu`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Optional, Tuple

import torch

from torchnumlint.runtime_check.runner import ReproContext

Inputs = Dict[str, torch.Tensor]
Builder = Callable[[ReproContext], Inputs]

FP32 = ("float32",)
PRECISION = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Repro:
    code: str
    oracle: str  # NF, ERR, WV, ZG or WARN
    func: str  # the function the first example defines
    dtypes: Tuple[str, ...]
    adversarial: Optional[Builder] = None
    benign: Optional[Builder] = None
    grad: Tuple[str, ...] = ()  # inputs whose gradients are checked
    thresholds: Mapping[str, str] = field(default_factory=dict)  # dtype -> what the inputs are
    fixed_from: str = "fixed"  # "fixed" (the pinned fix) or "good" (first good snippet, GUIDE rules)
    reference: str = "fixed"  # WV: the side run in float64 as the reference
    error_match: str = ""  # ERR: a substring of the expected error
    check_benign_equal: bool = True  # a SAFE fix must equal the original on benign inputs
    port_autocast: bool = False  # on the CPU, run CUDA autocast examples under CPU fp16 autocast
    custom: Optional[Callable[[ReproContext], object]] = None
    skip: Optional[Callable[[ReproContext], Optional[str]]] = None
    note: str = ""

    def threshold_for(self, dtype_name: str) -> str:
        return self.thresholds.get(dtype_name, self.thresholds.get("*", ""))


REPROS: Dict[str, Repro] = {}


def register(repro: Repro) -> Repro:
    if repro.code in REPROS:
        raise RuntimeError(f"duplicate reproduction {repro.code}")
    REPROS[repro.code] = repro
    return repro


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _put(ctx: ReproContext, **tensors: torch.Tensor) -> Inputs:
    """Tensors built in float32/float64 on the CPU, cast to the run's dtype and moved."""
    return {k: (v.to(ctx.dtype) if v.is_floating_point() else v).to(ctx.device) for k, v in tensors.items()}


# ---- TNL1xx --------------------------------------------------------------------------------------

VOCAB = 32000
# Spread (max - min logit) of a 32000-wide row beyond which softmax underflows to exactly 0:
# ln(2^-150 * 32000) etc. for the smallest subnormal of each format (catalogue: 93.6 fp32, 83 bf16,
# 7.0 fp16). The adversarial row sits just past it.
KL_SPREAD = {"float32": 94.0, "bfloat16": 84.0, "float16": 8.0, "autocast": 8.0}
KL_THRESHOLD = {"float32": 93.6, "bfloat16": 83.0, "float16": 7.0, "autocast": 7.0}


def _kl101_adversarial(ctx: ReproContext) -> Inputs:
    g = _gen(101)
    s1 = torch.randn(2, VOCAB, generator=g)
    s2 = torch.zeros(2, VOCAB)
    s2[0, 0] = -KL_SPREAD[ctx.dtype_name]  # row 0: one logit `spread` below the other 31999
    s2[1] = torch.randn(VOCAB, generator=g)  # row 1: an ordinary row, finite in both
    return _put(ctx, s1=s1, s2=s2)


def _kl101_benign(ctx: ReproContext) -> Inputs:
    # logit spread well below the dtype's threshold: about 27 (randn x 3), 4.5 in float16
    scale = 0.5 if ctx.compute_dtype == torch.float16 else 3.0
    g = _gen(1011)
    return _put(ctx, s1=torch.randn(4, VOCAB, generator=g) * scale, s2=torch.randn(4, VOCAB, generator=g) * scale)


register(
    Repro(
        "TNL101", "NF", "distill_loss", PRECISION,
        adversarial=_kl101_adversarial, benign=_kl101_benign, grad=("s1", "s2"),
        thresholds={d: f"2 rows x {VOCAB}; row 0 spread {KL_SPREAD[d]:g} (softmax underflows past "
                       f"{KL_THRESHOLD[d]:g} in {d}), row 1 randn" for d in KL_SPREAD},
    )
)


def _kl102_inputs(seed: int, scale: float) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        g = _gen(seed)
        a = torch.randn(8, 10, generator=g) * scale
        target = torch.softmax(torch.randn(8, 10, generator=g) * scale, -1)
        return _put(ctx, a=a, target=target)

    return build


register(
    Repro(
        "TNL102", "WV", "kl_loss", FP32,
        adversarial=_kl102_inputs(102, 2.0), benign=_kl102_inputs(1021, 0.5), grad=("a",),
        thresholds={"*": "8 x 10 logits (randn x 2) against a softmax target; reference: the fix in float64"},
        check_benign_equal=False,  # UNSAFE: the fix computes the intended (different) loss
    )
)


# spread of a 10-wide row (one logit `spread` below the other nine) past which softmax underflows:
# ln(smallest subnormal / 2) + ln 9: 101.8 fp32, 91.3 bf16, 15.1 fp16 (catalogue: 120 fp32, 20 fp16)
LOG_SOFTMAX_SPREAD = {"float32": 120.0, "bfloat16": 100.0, "float16": 20.0}


def _tnl103_adversarial(ctx: ReproContext) -> Inputs:
    g = _gen(103)
    logits = torch.randn(4, 10, generator=g)
    logits[0] = 0.0
    logits[0, 0] = -LOG_SOFTMAX_SPREAD[ctx.dtype_name]
    return _put(ctx, logits=logits)


def _randn(name: str, shape, scale: float, seed: int) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        return _put(ctx, **{name: torch.randn(*shape, generator=_gen(seed)) * scale})

    return build


register(
    Repro(
        "TNL103", "NF", "log_probs", PRECISION,
        adversarial=_tnl103_adversarial, benign=_randn("logits", (4, 10), 2.0, 1031), grad=("logits",),
        thresholds={d: f"4 x 10 logits; row 0 has one logit {v:g} below the rest (softmax underflows: "
                       f"log 0 = -inf), rows 1-3 randn" for d, v in LOG_SOFTMAX_SPREAD.items()},
    )
)

# 1 - sigmoid(z) == 0 from z >= 16.64 fp32, 8.32 fp16, 6.25 bf16 (catalogue)
SIGMOID_SATURATION = {"float32": 16.64, "bfloat16": 6.25, "float16": 8.32}


def _tnl104_adversarial(ctx: ReproContext) -> Inputs:
    limit = SIGMOID_SATURATION[ctx.dtype_name]
    z = torch.cat([torch.linspace(-6.0, 4.0, 11), torch.tensor([limit + 0.5, 2 * limit, 40.0])])
    return _put(ctx, z=z)


register(
    Repro(
        "TNL104", "NF", "log_not", PRECISION,
        adversarial=_tnl104_adversarial, benign=_randn("z", (64,), 2.0, 1041), grad=("z",),
        thresholds={d: f"z in -6..4 plus {v + 0.5:g}, {2 * v:g}, 40 (1 - sigmoid(z) is 0 from z >= {v:g} "
                       f"in {d})" for d, v in SIGMOID_SATURATION.items()},
    )
)


# ---- TNL2xx --------------------------------------------------------------------------------------


def _rows_with_constant(ctx: ReproContext, seed: int, zero: bool) -> torch.Tensor:
    g = _gen(seed)
    x = torch.randn(4, 16, generator=g)
    x[1] = 0.0 if zero else 3.0  # a constant (zero) row
    return x


register(
    Repro(
        "TNL201", "NF", "standardize", FP32,
        adversarial=lambda ctx: _put(ctx, x=_rows_with_constant(ctx, 201, zero=False)),
        benign=_randn("x", (4, 16), 2.0, 2011), grad=("x",),
        thresholds={"*": "4 x 16, row 1 constant (std 0: 0/0 = NaN), other rows randn"},
        note="float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory)",
    )
)

register(
    Repro(
        "TNL202", "NF", "unit_rows", FP32,
        adversarial=lambda ctx: _put(ctx, x=_rows_with_constant(ctx, 202, zero=True)),
        benign=_randn("x", (4, 16), 2.0, 2021), grad=("x",),
        thresholds={"*": "4 x 16, row 1 all zeros (norm 0: 0/0 = NaN), other rows randn"},
        note="float32 only: F.normalize's default eps 1e-12 is 0 in float16 (TNL303's territory)",
    )
)


def _tnl204_adversarial(ctx: ReproContext) -> Inputs:
    x = _rows_with_constant(ctx, 204, zero=True)
    if ctx.dtype_name == "float16":
        x[2, ::2], x[2, 1::2] = 300.0, -300.0  # centred +-300: (+-300) ** 2 = 90000 overflows float16 (max 65504)
    return _put(ctx, x=x)


register(
    Repro(
        "TNL204", "NF", "embedding_norm_loss", ("float32", "float16"),
        adversarial=_tnl204_adversarial, benign=_randn("x", (4, 16), 2.0, 2041), grad=("x",),
        thresholds={"float32": "4 x 16, row 1 all zeros (gradient of sqrt at 0), other rows randn",
                    "float16": "4 x 16, row 1 all zeros, row 2 +-300 (x**2 overflows float16 above 255.9)"},
    )
)

register(
    Repro(
        "TNL206", "NF", "inv_std", FP32,
        adversarial=lambda ctx: _put(ctx, x=_rows_with_constant(ctx, 206, zero=False)),
        benign=_randn("x", (4, 16), 2.0, 2061), grad=("x",),
        thresholds={"*": "4 x 16, row 1 constant (var 0: rsqrt(0) = inf), other rows randn"},
        note="float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory)",
    )
)


# ---- TNL3xx --------------------------------------------------------------------------------------


def _tnl301_inputs(seed: int, scale: float) -> Builder:
    def build(ctx: ReproContext) -> Inputs:
        g = _gen(seed)
        x = torch.randn(32, 16, generator=g)
        w = torch.randn(16, 16, generator=g) * scale
        return _put(ctx, x=x, w=w)

    return build


register(
    Repro(
        "TNL301", "NF", "step", ("autocast",),
        adversarial=_tnl301_inputs(301, 1.0), benign=_tnl301_inputs(3011, 0.1), grad=("x", "w"),
        thresholds={"*": "scores = x @ w, x 32 x 16 randn, w 16 x 16 randn: gram = scores @ scores.T; gram * gram overflows float16 once a Gram entry passes 255"},
        port_autocast=True,
    )
)


def _tnl302(ctx: ReproContext):
    """ZG: the example's train_step (fp16 autocast, backward without a scaler) returns a weight
    gradient that is exactly 0 everywhere; the rule's first good snippet (`fit`, with
    torch.amp.GradScaler) trains the same loss and its unscaled gradient is not 0."""
    from torchnumlint.runtime_check import oracles
    from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED

    g = _gen(302)
    x = torch.randn(8, 64, generator=g).to(ctx.device)
    w0 = (torch.randn(64, 64, generator=g) * 0.1).to(ctx.device)
    evidence, numbers = [], {}

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
    evidence.append(f"true gradient (float64): max |dL/dw| {float(expected.abs().max()):.3g}; "
                    f"GradScaler w.grad vs it: rel {err.rel:.3g}")
    if zb.zeros == 0:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="no gradient is exactly 0")
    if zf.zeros >= zb.zeros or not fin.finite:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers,
                          reason="with the scaler the gradients are still 0 or not finite")
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


register(
    Repro(
        "TNL302", "ZG", "train_step", ("autocast",),
        thresholds={"*": "w 64 x 64, x 8 x 64, loss = (x @ w).sum() * 1e-9 under float16 autocast"},
        fixed_from="good", port_autocast=True, custom=_tnl302,
    )
)


register(
    Repro(
        "TNL306", "WARN", "forward_fp16", ("autocast",),
        adversarial=lambda ctx: _put(ctx, x=torch.randn(4, 8, generator=_gen(306)),
                                     w=torch.randn(8, 4, generator=_gen(3061))),
        thresholds={"*": "x 4 x 8 @ w 8 x 4 under the deprecated torch.cuda.amp.autocast()"},
    )
)
