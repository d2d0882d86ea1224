"""TNL306 deprecated-cuda-amp: `torch.cuda.amp.autocast()` warns (FutureWarning); the
`torch.amp.autocast("cuda")` spelling does not and computes the same values.

A WARN check of its own: off CUDA the runner runs an example's CUDA autocast under the emulated
CUDA policy (`cuda_policy.port`), which rewrites `torch.cuda.amp.autocast(` into the emulation
and so removes the very call that warns. The warnings are therefore recorded from the texts as
written (exec'd and called as they are: on a machine without CUDA, torch disables CUDA autocast
with a UserWarning, after the FutureWarning of the deprecated spelling), at load as well as at the
call (example 2 builds its deprecated GradScaler at import, example 3 decorates with the deprecated
custom_fwd/custom_bwd); the values are compared from the runner's own load (emulated where the
example's autocast is CUDA's).

Examples 2 (`step(model, x, y, loss_fn, optimizer)`: deprecated GradScaler and `autocast` imported
from torch.cuda.amp) and 3 (`run(x, use_amp)`: `amp.custom_fwd`, `amp.custom_bwd`,
`amp.autocast`) are reproduced too, in float32: their autocast is not CUDA's spelled with
"cuda", so it is not emulated, and off CUDA torch disables it; the values compare to float32's
tolerance.
"""

from __future__ import annotations

import warnings
from typing import Callable, Dict, List, Tuple

import torch

from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import FP32, Repro, ReproContext, load_function
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, Outcome, Result
from torchnumlint.runtime_check.repros.inputs import gen

# Calls a function the example defines on fixed inputs and returns the value it computed.
Call = Callable[[Callable], torch.Tensor]


def as_written(ctx: ReproContext, side: str, call: Call) -> Tuple[Outcome, List[str]]:
    """Load and call the side's text exactly as written; the deprecation warnings of both steps."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = load_function(ctx.source(side), ctx.repro.func, f"<{ctx.info.code} {side} as written>")
    outcome = oracles.run(side, lambda: call(fn), {})
    outcome.warnings = [f"{w.category.__name__}: {w.message}" for w in caught] + outcome.warnings
    return outcome, oracles.deprecations(outcome)


def warn_check(call: Call) -> Callable[[ReproContext], Result]:
    """The original warns a deprecation, the fix does not, and (SAFE) both compute the same values."""

    def check(ctx: ReproContext) -> Result:
        bad, warned = as_written(ctx, "bad", call)
        fix, still = as_written(ctx, "fixed", call)
        evidence = [
            f"original as written: {len(warned)} deprecation warning(s)" + (f": {warned[0][:160]}" if warned else ""),
            f"fix as written: {len(still)} deprecation warning(s)" + (f": {still[0][:160]}" if still else ""),
        ]
        numbers: Dict[str, object] = {"original_deprecations": warned, "fix_deprecations": still}
        if not bad.ok or not fix.ok:
            evidence += [bad.describe(), fix.describe()]
            return ctx.result(
                NOT_REPRODUCED if not bad.ok else FIX_FAILED,
                evidence=evidence,
                numbers=numbers,
                reason="the original raised" if not bad.ok else "the fix raised",
            )
        values = [oracles.run(side, lambda side=side: call(ctx.load(side)), {}) for side in ("bad", "fixed")]
        same = oracles.worst(oracles.compare(values[1], values[0]))
        assert same is not None  # both sides ran (checked above), so there are values to compare
        numbers["fix_vs_original"] = same
        evidence.append(f"values (as the runner loads them): fix vs original {same.describe()} (tol {ctx.tol:.2g})")
        if not warned:
            return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="no deprecation warning")
        if still:
            return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix still warns")
        if same.rel > ctx.tol:
            return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the SAFE fix changes the values")
        return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)

    return check


def product(fn: Callable) -> torch.Tensor:
    """forward_fp16(x, w): x 4 x 8 @ w 8 x 4."""
    return fn(torch.randn(4, 8, generator=gen(306)), torch.randn(8, 4, generator=gen(3061)))


def weight_update(fn: Callable) -> torch.Tensor:
    """step(model, x, y, mse_loss, SGD(lr=0.1)) on a fresh Linear(8, 4): the change of its weight
    (the update itself, so a loss scaled by 1.005 shows as 0.5 %, not as 0.5 % of a step)."""
    g = gen(3062)
    model = torch.nn.Linear(8, 4)
    with torch.no_grad():
        model.weight.copy_(torch.randn(4, 8, generator=g))
        model.bias.zero_()
    before = model.weight.detach().clone()
    fn(
        model,
        torch.randn(16, 8, generator=g),
        torch.randn(16, 4, generator=g),
        torch.nn.functional.mse_loss,
        torch.optim.SGD(model.parameters(), lr=0.1),
    )
    return model.weight.detach() - before


def squared(fn: Callable) -> torch.Tensor:
    """run(x, use_amp=True) and the gradient of its sum: x * x and 2 x."""
    x = torch.randn(4, 8, generator=gen(3063)).requires_grad_(True)
    out = fn(x, True)
    (grad,) = torch.autograd.grad(out.sum(), x)
    return torch.cat([out.detach().reshape(-1), grad.reshape(-1)])


REPRO = Repro(
    "TNL306",
    "WARN",
    "forward_fp16",
    ("autocast",),
    custom=warn_check(product),
    thresholds={"*": "x 4 x 8 @ w 8 x 4 under the deprecated torch.cuda.amp.autocast()"},
)

FURTHER = (
    Repro(
        "TNL306",
        "WARN",
        "step",
        FP32,
        example=1,
        custom=warn_check(weight_update),
        thresholds={
            "*": "a module-level torch.cuda.amp.GradScaler and autocast(dtype=float16) from torch.cuda.amp: "
            "one SGD step of a Linear(8, 4) on mse_loss"
        },
    ),
    Repro(
        "TNL306",
        "WARN",
        "run",
        FP32,
        example=2,
        custom=warn_check(squared),
        thresholds={
            "*": "a custom Function decorated with torch.cuda.amp.custom_fwd/custom_bwd, run under "
            "amp.autocast(True): x * x and its gradient, x 4 x 8"
        },
    ),
)
