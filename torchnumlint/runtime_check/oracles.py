"""The oracles of the rule catalogue, as checks on the outcome of running code on a device.

NF   the original gives NaN/Inf in the forward or in the gradient of its inputs; the fix is finite
     and, where the original is finite, equal to it within the dtype's tolerance.
ERR  the original raises; the fix runs and is finite.
WV   the original is finite but wrong against a float64 reference; the fix is right.
ZG   gradients silently become exactly 0.
WARN the original emits a deprecation warning (FutureWarning / DeprecationWarning); the fix none.

Every check returns the numbers that prove it (counts, shapes, differences, tolerances), so the
verdict can be read and trusted without rerunning anything. Imports torch and the standard
library only.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

CONFIRMED = "CONFIRMED"
NOT_REPRODUCED = "NOT REPRODUCED"
FIX_FAILED = "FIX FAILED"
SKIPPED = "SKIPPED"

VERDICTS = (CONFIRMED, NOT_REPRODUCED, FIX_FAILED, SKIPPED)

# Tolerances are derived, not chosen: a value computed in a dtype is compared with the float64
# reference norm-wise (max|a - b| <= tol * max|b|), and tol is ULPS units of the dtype's machine
# epsilon: the rounding of the result plus a few roundings inside the formula, at the scale of the
# values. float32 4.8e-7, float16 3.9e-3, bfloat16 3.1e-2 (autocast computes in float16). A fix off
# by 0.5 % fails in float32 and float16 on this alone; in every dtype it fails the formula check,
# which runs the fix's own code in float64 against the reference within FORMULA_TOL.
ULPS = 4
COMPUTE_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "autocast": torch.float16,
}
# float64 against float64: the reference and the fix are different formulas (rounding differs by a
# few ulps per op, up to ~1e-13 relative over the reductions of 64000 entries here), and a fix that
# changes the mathematics at all moves values by far more than 1e-9.
FORMULA_TOL = 1e-9
# WV: the original counts as wrong when its relative error against the float64 reference exceeds
# this many times the dtype's tolerance.
WRONG_FACTOR = 10.0


def tolerance(dtype_name: str) -> float:
    return ULPS * torch.finfo(COMPUTE_DTYPES[dtype_name]).eps


@dataclass
class TensorCount:
    """Non-finite census of one tensor."""

    name: str
    shape: Tuple[int, ...]
    numel: int
    nan: int
    inf: int
    zeros: int

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.shape) or "scalar"
        if self.finite:
            return f"{self.name} finite ({shape})"
        parts = []
        if self.nan:
            parts.append(f"NaN {self.nan}/{self.numel}")
        if self.inf:
            parts.append(f"Inf {self.inf}/{self.numel}")
        return f"{self.name} {' '.join(parts)} ({shape})"

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "numel": self.numel, "nan": self.nan, "inf": self.inf, "zeros": self.zeros}


def count(name: str, t: torch.Tensor) -> TensorCount:
    t = t.detach()
    if not (t.is_floating_point() or t.is_complex()):
        return TensorCount(name, tuple(t.shape), t.numel(), 0, 0, int((t == 0).sum()))
    return TensorCount(name, tuple(t.shape), t.numel(), int(torch.isnan(t).sum()), int(torch.isinf(t).sum()), int((t == 0).sum()))


@dataclass
class Outcome:
    """What one function did on one set of inputs: its output and the gradients of its inputs."""

    label: str
    error: Optional[str] = None
    error_type: Optional[str] = None
    out: Optional[torch.Tensor] = None
    grads: Dict[str, Optional[torch.Tensor]] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def counts(self) -> List[TensorCount]:
        result = []
        if self.out is not None:
            result.append(count("forward", self.out))
        for name, g in self.grads.items():
            if g is not None:
                result.append(count(f"grad {name}", g))
        return result

    @property
    def finite(self) -> bool:
        return self.ok and all(c.finite for c in self.counts())

    def describe(self) -> str:
        if not self.ok:
            return f"{self.label} raised {self.error_type}: {self.error}"
        bad = [c.describe() for c in self.counts() if not c.finite]
        if bad:
            return f"{self.label}: " + ", ".join(bad)
        return f"{self.label}: all finite"


def _to_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return torch.cat([v.reshape(-1) for v in value])
    return torch.as_tensor(value)


def run(
    label: str,
    fn: Callable[..., Any],
    inputs: Dict[str, Union[torch.Tensor, float]],
    grad: Sequence[str] = (),
    context: Callable[[], Any] = contextlib.nullcontext,
) -> Outcome:
    """Call `fn(*inputs)` under `context`, then backward of `(output * weights).sum()` into the
    inputs named in `grad` (fresh leaves, so two runs never share gradients). `weights` are a fixed
    random tensor (seed 0, the same for every run of the same shape): with a plain sum, outputs
    that sum to a constant (softmax, normalisation) would have gradients that are pure rounding."""
    args = {}
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().clone()
            if name in grad:
                value.requires_grad_(True)
        args[name] = value
    outcome = Outcome(label)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with context():
                out = _to_tensor(fn(*args.values()))
            outcome.out = out.detach()
            leaves = [v for v in (args[n] for n in grad) if isinstance(v, torch.Tensor)]
            if leaves and out.requires_grad:
                gs = torch.autograd.grad(_weighted_sum(out), leaves, allow_unused=True)
                outcome.grads = {n: (g.detach() if g is not None else None) for n, g in zip(grad, gs)}
        except Exception as exc:  # the original may raise on purpose (ERR); the caller judges
            outcome.error = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else repr(exc)
            outcome.error_type = type(exc).__name__
    outcome.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    return outcome


def _weighted_sum(out: torch.Tensor) -> torch.Tensor:
    if out.numel() == 1:
        return out.sum()
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
    return (out * weights.to(device=out.device, dtype=out.dtype)).sum()


@dataclass
class Diff:
    """Norm-wise relative difference of `a` against `b` over the entries where `mask` holds."""

    name: str
    compared: int
    max_abs: float
    scale: float

    @property
    def rel(self) -> float:
        if self.compared == 0:
            return 0.0
        if self.scale == 0:
            return 0.0 if self.max_abs == 0 else math.inf
        return self.max_abs / self.scale

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "compared": self.compared, "max_abs_diff": self.max_abs, "scale": self.scale, "rel_diff": self.rel}

    def describe(self) -> str:
        return f"{self.name}: max|diff| {self.max_abs:.3g} (rel {self.rel:.3g}) over {self.compared}"


def diff(name: str, a: torch.Tensor, b: torch.Tensor, mask: Optional[torch.Tensor] = None, floor: float = 0.0) -> Diff:
    """Compare `a` to `b` (the reference side) where `b` is finite (and `mask` holds). Entries
    compared where `a` is not finite count as an infinite difference; differences at or below
    `floor` (a dtype's smallest normal number: below it the grid is absolute, not relative) as 0."""
    a = a.detach().to(torch.float64).cpu()
    b = b.detach().to(torch.float64).cpu()
    if a.shape != b.shape:
        return Diff(name + f" (shapes {tuple(a.shape)} vs {tuple(b.shape)})", 1, math.inf, 1.0)
    keep = torch.isfinite(b)
    if mask is not None:
        keep &= mask.cpu()
    n = int(keep.sum())
    if n == 0:
        return Diff(name, 0, 0.0, 0.0)
    da, db = a[keep], b[keep]
    if not bool(torch.isfinite(da).all()):
        return Diff(name, n, math.inf, float(db.abs().max()))
    gap = (da - db).abs()
    gap = torch.where(gap <= floor, torch.zeros_like(gap), gap)
    return Diff(name, n, float(gap.max()), float(db.abs().max()))


def fields(o: Outcome) -> Dict[str, torch.Tensor]:
    fields = {}
    if o.out is not None:
        fields["forward"] = o.out
    for name, g in o.grads.items():
        if g is not None:
            fields[f"grad {name}"] = g
    return fields


def compare(a: Outcome, b: Outcome) -> List[Diff]:
    """Forward and gradient differences of `a` against `b`, where `b` is finite."""
    fa, fb = fields(a), fields(b)
    return [diff(name, fa[name], fb[name]) for name in fb if name in fa]


def worst(diffs: Sequence[Diff]) -> Optional[Diff]:
    return max(diffs, key=lambda d: d.rel, default=None)


# ---- ZG ------------------------------------------------------------------------------------------


@dataclass
class ZeroCount:
    name: str
    zeros: int
    numel: int

    def describe(self) -> str:
        return f"{self.name}: {self.zeros}/{self.numel} exactly 0"

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "zeros": self.zeros, "numel": self.numel}


def zero_count(name: str, t: Optional[torch.Tensor]) -> ZeroCount:
    if t is None:
        return ZeroCount(name, 0, 0)
    return ZeroCount(name, int((t.detach() == 0).sum()), t.numel())


# ---- WARN ----------------------------------------------------------------------------------------

DEPRECATION = ("FutureWarning", "DeprecationWarning", "PendingDeprecationWarning")


def deprecations(outcome: Outcome) -> List[str]:
    return [w for w in outcome.warnings if w.split(":", 1)[0] in DEPRECATION]


# ---- the verdict ---------------------------------------------------------------------------------


@dataclass
class Result:
    """The verdict for one rule x device x dtype, with the evidence behind it."""

    code: str
    name: str
    device: str
    dtype: str
    oracle: str
    safety: str
    verdict: str
    evidence: List[str] = field(default_factory=list)
    numbers: Dict[str, Any] = field(default_factory=dict)
    threshold: str = ""
    reason: str = ""
    example: int = 0  # which of the rule's examples (1-based; 0: the rule as a whole)

    @property
    def passed(self) -> bool:
        return self.verdict in (CONFIRMED, SKIPPED)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "code": self.code,
            "example": self.example,
            "name": self.name,
            "device": self.device,
            "dtype": self.dtype,
            "oracle": self.oracle,
            "safety": self.safety,
            "verdict": self.verdict,
            "reason": self.reason,
            "threshold": self.threshold,
            "evidence": list(self.evidence),
            "numbers": _jsonable(self.numbers),
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (TensorCount, Diff, ZeroCount)):
        return _jsonable(value.as_dict())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
