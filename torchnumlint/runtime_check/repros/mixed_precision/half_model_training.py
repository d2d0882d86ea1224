"""TNL304 half-model-training: a module cast to float16 and trained computes its loss in float16,
which is Inf above 65504; a float16 weight average with a decay close to 1 stops moving.

Checks of their own (the rule is a guide, with no fix to run):
- the first example's `train` (a `Linear(64, 1).half()` trained with SGD) gives an Inf `mse_loss`
  against targets of 300; the rule's first good snippet, the same steps with float32 weights,
  gives the finite loss (above 65504);
- the second example's `averaged` (a float16 EMA with decay 0.9999 of weights drifting from 1.0 to
  1.5 over 10000 steps) is compared with the average's mathematics in float64: the float16 average
  stays at 1.0 where the true one reaches 1.18; the rule's second good snippet, the float32
  average, is within float32's rounding of it (one float32 eps a step).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import Repro, ReproContext, load_function
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, Result
from torchnumlint.runtime_check.repros.inputs import gen

_STEPS, _DECAY, _DRIFT = 10000, 0.9999, 0.5 / 10000


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
        return ctx.result(
            FIX_FAILED, evidence=evidence, numbers=numbers, reason="the float32 loss is not the finite value above float16's range"
        )
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


def _reference() -> float:
    """The average's mathematics in float64: e <- d * e + (1 - d) * p, with p drifting from 1.0."""
    e = p = 1.0
    for _ in range(_STEPS):
        p += _DRIFT
        e = _DECAY * e + (1 - _DECAY) * p
    return e


def _model() -> torch.nn.Module:
    model = torch.nn.Linear(64, 64, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    return model


def check_average(ctx: ReproContext) -> Result:
    reference = _reference()
    numbers = {"reference": reference}
    evidence = [f"float64 average of weights 1.0 -> 1.5 over {_STEPS} steps, decay {_DECAY}: {reference:.6g}"]
    bad = oracles.run("original", lambda: ctx.load("bad")(_model().to(ctx.device), _DRIFT), {}, ())
    if not bad.ok:
        return ctx.result(NOT_REPRODUCED, evidence=evidence + [bad.describe()], reason="the original raised")
    assert bad.out is not None  # a run that is ok has an output
    got = bad.out.double().mean().item()
    numbers["float16_average"] = got
    evidence.append(f"float16 average (the example): {got:.6g} ({bad.out.dtype})")
    good_text = ctx.info.good[1]

    def run_good():
        return load_function(good_text, "averaged", f"<{ctx.info.code} good 2>")(_model().to(ctx.device), _DRIFT)

    good = oracles.run("float32 average", run_good, {}, ())
    if not good.ok:
        return ctx.result(FIX_FAILED, evidence=evidence + [good.describe()], reason="the float32 average raised")
    assert good.out is not None  # a run that is ok has an output
    kept = good.out.double().mean().item()
    numbers["float32_average"] = kept
    evidence.append(f"float32 average (good snippet): {kept:.6g}")
    moved = reference - 1.0
    if abs(got - 1.0) > 0.1 * moved:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="the float16 average moves")
    # each float32 update rounds once: at most half an ulp of the average per step
    rounding = _STEPS * torch.finfo(torch.float32).eps
    if abs(kept - reference) > rounding:
        return ctx.result(
            FIX_FAILED,
            evidence=evidence,
            numbers=numbers,
            reason=f"the float32 average is further than {rounding:.2g} from the float64 one",
        )
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


REPRO = Repro(
    "TNL304",
    "NF",
    "train",
    ("float16",),
    thresholds={"*": "Linear(64, 1), x 8 x 64 randn, targets 300: (300)^2 > 65504"},
    fixed_from="good",
    custom=check,
)

FURTHER = (
    Repro(
        "TNL304",
        "WV",
        "averaged",
        ("float16",),
        example=1,
        thresholds={"*": "64 x 64 weights from 1.0, drift 5e-5 a step, 10000 steps, decay 0.9999"},
        fixed_from="good",
        custom=check_average,
    ),
)
