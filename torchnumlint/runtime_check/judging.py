"""How verify judges a fix against the rule's mathematics (the checks of `checks.py` ask these).

A fix is judged three ways:

- gradients kept: every input the original (or the mathematics) has a gradient for, the fix has one;
- formula: the fix's own code, run in float64, equals the float64 reference (an UNSAFE fix: within
  its stated bound inside the guarded region, and to the dtype's precision away from it);
- precision: the fix in the run's dtype equals the reference within a few ulps of that dtype (or is
  no further from it than the original where the original is finite); where the original is not
  finite it is compared with the reference too, and the evidence says so.

Away from the hazard, the formula and precision checks run on the benign inputs and again on each
of `Repro.shapes` (a batch dim, 3-D and 4-D, the reduced dim not last, other scales), so a fix that
drops a `dim` or a `keepdim`, or broadcasts wrongly, fails where 2-D inputs would let it pass. The
words are the numbers': a fix that needs its UNSAFE bound is "within the stated bound (85%)", never
"matches the reference", and a reference's convention where the mathematics is undefined
(`Repro.convention`) is printed with the verdict.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import torch

from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import Inputs, ReproContext, ReproError
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, SKIPPED, Outcome, Result


def _unsupported(outcome: Outcome) -> bool:
    msg = outcome.error or ""
    return "not implemented for" in msg or "not supported" in msg.lower() and "dtype" in msg.lower()


def run_pair(ctx: ReproContext, inputs: Inputs) -> Tuple[Outcome, Outcome]:
    bad = oracles.run("original", ctx.load("bad"), inputs, ctx.repro.grad)
    fix = oracles.run("fix", ctx.load(ctx.repro.fixed_from), inputs, ctx.repro.grad)
    return bad, fix


def skip_unsupported(ctx: ReproContext, outcome: Outcome) -> Optional[Result]:
    if not outcome.ok and _unsupported(outcome):
        return ctx.result(SKIPPED, reason=f"{ctx.dtype_name} unsupported on {ctx.device.type}: {outcome.error}")
    return None


def _float64(inputs: Inputs) -> Inputs:
    return {k: (v.detach().to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in inputs.items()}


class Judgement:
    """The evidence and numbers of one check, and its first failure."""

    def __init__(self) -> None:
        self.evidence: List[str] = []
        self.numbers: Dict[str, object] = {}
        self.failure = ""

    def fail(self, why: str) -> None:
        self.failure = self.failure or why


def reference(ctx: ReproContext, inputs: Inputs) -> Outcome:
    """The rule's mathematics in float64 on the run's inputs (rounded to the run's dtype first)."""
    if ctx.repro.reference is None:
        raise ReproError(f"{ctx.info.code} example {ctx.repro.example + 1}: no float64 reference is declared")
    return oracles.run("float64 reference", ctx.repro.reference, _float64(inputs), ctx.repro.grad)


def gradients_kept(j: Judgement, ctx: ReproContext, fix: Outcome, *others: Outcome) -> None:
    given = {n for o in others for n, g in o.grads.items() if g is not None}
    dropped = sorted(n for n in given if fix.grads.get(n) is None)
    if dropped:
        j.fail(f"the fix drops the gradient of {', '.join(dropped)} (the original or the mathematics has one)")


def _within(
    name: str, a: torch.Tensor, ref: torch.Tensor, mask: Optional[torch.Tensor], tol: float, bound=None, floor: float = 0.0
) -> Tuple[bool, str, Optional[float]]:
    """Does `a` equal `ref` where `ref` is finite (and `mask` holds): norm-wise within `tol`, or
    entry by entry within `bound` plus `tol` of the scale? Differences below `floor` are
    rounding to the subnormal grid. Returns (ok, what was measured, and where the bound was needed
    the relative difference it allowed: the values are then not equal, only within the stated
    bound, and the words must say so)."""
    d = oracles.diff(name, a, ref, mask, floor)
    if a.shape != ref.shape:  # a dim dropped or kept, a wrong broadcast: no entry can be matched
        return False, d.describe(), None
    if d.compared == 0:
        return True, f"{name}: nothing to compare", None
    if bound is None or d.rel <= tol:
        return d.rel <= tol, f"{d.describe()} (tol {tol:.2g})", None
    a64, r64 = a.detach().to(torch.float64).cpu(), ref.detach().to(torch.float64).cpu()
    keep = torch.isfinite(r64) & (mask.cpu() if mask is not None else True)
    gap = (a64[keep] - r64[keep]).abs()
    allowed = bound.allows(gap - tol * d.scale, r64[keep])
    outside = int((~allowed).sum()) if torch.isfinite(gap).all() else int(gap.numel())
    return outside == 0, f"{d.describe()}; {outside} entries outside the bound ({bound.why})", d.rel


def _agreement(ok: bool, bounded: Optional[float]) -> str:
    """The words for a comparison: "matches" only when the values agree to the tolerance; a fix
    that needed its bound is "within the stated bound" with its measured difference (TNL112's
    clamped log-odds are 85 % off: that is no match)."""
    if not ok:
        return "does NOT match the reference"
    if bounded is not None:
        return f"is within the stated bound ({bounded:.0%} of the reference's largest value) of the reference"
    return "matches the reference"


def formula(j: Judgement, ctx: ReproContext, inputs, ref: Outcome, guarded: bool) -> None:
    """The fix's own code in float64 against the reference: the mathematics of the fix."""
    fix64 = oracles.run("fix in float64", ctx.load(ctx.repro.fixed_from, dtype=torch.float64), _float64(inputs), ctx.repro.grad)
    if not fix64.ok:
        j.fail(f"the fix raises in float64: {fix64.error}")
        return
    unsafe = ctx.fix_safety != "SAFE"
    bound = ctx.repro.bound if unsafe and guarded else None
    if unsafe and guarded and bound is None:
        raise ReproError(f"{ctx.info.code}: an {ctx.fix_safety} fix needs the bound of its change (Repro.bound)")
    # away from its guard an UNSAFE fix must not change a value that float32, the widest training
    # dtype, can resolve (its eps may move values by far less: + 1e-8 on a divisor of 1)
    tol = oracles.tolerance("float32") if unsafe and not guarded else oracles.FORMULA_TOL
    fields, refs = oracles.fields(fix64), oracles.fields(ref)
    needed = []
    for name, r in refs.items():
        if name not in fields:
            continue
        ok, text, bounded = _within(name, fields[name], r, None, tol, bound)
        if not ok:
            j.evidence.append(f"fix in float64 vs reference: {text}")
            j.fail("the fix computes other values than the mathematics" + (" beyond its bound" if bound else ""))
            return
        if bounded is not None:
            needed.append(f"{name} {bounded:.0%}")
    if needed:
        j.evidence.append(
            f"fix in float64 is within the stated bound of the reference, not equal to it "
            f"({', '.join(needed)} of the reference's largest value; {bound.why if bound else ''})"
        )
    else:
        j.evidence.append(f"fix in float64 equals the reference (tol {tol:.2g})")


def _precision(j: Judgement, ctx: ReproContext, inputs, bad: Outcome, fix: Outcome, ref: Outcome, guarded: bool) -> None:
    """The fix in the run's dtype against the reference: where the original is finite, and where it
    is not. The allowance is derived: 4 ulps of the dtype (the fix's own rounding) on top of the
    largest of the original's own error where it is finite (a fix need not beat the code it
    replaces there), the error of the rule's mathematics itself evaluated in the run's dtype (under
    the run's autocast policy), and, for a gradient, the forward's
    rounding (half an ulp at the forward's largest magnitude) taken as a relative error: a backward
    that exponentiates the difference of an input and its own rounded output (logsumexp, softmax,
    log_softmax) inherits the forward's absolute error as a relative one (measured: torch.logsumexp
    in bfloat16 at energies of 94 rounds its output 92.11 to 92.0 and its gradient is 10 % low).
    Differences below the dtype's smallest normal number are rounding to the subnormal grid."""
    bound = ctx.repro.bound if ctx.fix_safety != "SAFE" and guarded else None
    floor = torch.finfo(ctx.compute_dtype).tiny
    assert ctx.repro.reference is not None  # `_reference` has run: it refuses a repro without one
    in_dtype = oracles.run("reference in the run's dtype", ctx.repro.reference, inputs, ctx.repro.grad, ctx.autocast_region)
    fb, ff, fr, fd = oracles.fields(bad), oracles.fields(fix), oracles.fields(ref), oracles.fields(in_dtype)
    for name, r in fr.items():
        if name not in ff:
            continue
        o = fb.get(name)
        comparable = o is not None and o.shape == r.shape
        finite = torch.isfinite(o.detach()).cpu() if o is not None and comparable else torch.ones(r.shape, dtype=torch.bool)
        orig_err = oracles.diff(name, o, r, finite, floor).rel if o is not None and comparable else 0.0
        d = fd.get(name)
        math_err = oracles.diff(name, d, r, None, floor).rel if d is not None and d.shape == r.shape else 0.0
        if not math.isfinite(math_err):  # the mathematics overflows in this dtype: it allows nothing
            math_err = 0.0
        carried = _forward_rounding(ctx, fr) if name.startswith("grad") else 0.0
        allowance = ctx.tol + max(orig_err, math_err, carried)
        ok, text, _ = _within(name, ff[name], r, finite, allowance, bound, floor)
        j.numbers[f"{name} fix vs reference"] = text
        why = (
            f"original's own error {orig_err:.2g}, the mathematics' in {ctx.dtype_name} {math_err:.2g}, "
            f"the forward's rounding {carried:.2g}"
        )
        if not ok:
            j.evidence.append(f"{name}: where the original is finite, fix vs reference {text}; {why}")
            j.fail(f"the fix is off the float64 reference in {ctx.dtype_name} where the original is finite")
            return
        rest = ~finite
        if bool(rest.any()):
            ok, text, bounded = _within(name, ff[name], r, rest, allowance, bound, floor)
            undefined = int((rest & ~torch.isfinite(r.detach()).cpu()).sum())
            note = f"; {undefined} entries where the mathematics itself is undefined are not compared" if undefined else ""
            j.evidence.append(
                f"{name}: where the original is not finite ({int(rest.sum())} entries) the fix "
                f"{'differs from the original by necessity and ' if ok else ''}"
                f"{_agreement(ok, bounded)}: {text}{note}" + ("" if ok else f"; {why}")
            )
            if not ok:
                j.fail(f"the fix is wrong where the original is not finite ({name})")
                return
    j.evidence.append(
        f"fix in {ctx.dtype_name} agrees with the float64 reference (within 4 ulps beyond the "
        "original's error where finite, or the mathematics' own error in this dtype)"
    )


def _forward_rounding(ctx: ReproContext, reference_fields: Dict[str, torch.Tensor]) -> float:
    """Half an ulp of the run's dtype at the largest finite magnitude of the forward."""
    forward = reference_fields.get("forward")
    if forward is None:
        return 0.0
    finite = forward[torch.isfinite(forward)]
    return 0.5 * torch.finfo(ctx.compute_dtype).eps * float(finite.abs().max()) if finite.numel() else 0.0


def judge(j: Judgement, ctx: ReproContext, inputs, bad: Outcome, fix: Outcome, guarded: bool) -> None:
    ref = reference(ctx, inputs)
    if not ref.ok:
        raise ReproError(f"the float64 reference raised: {ref.error}")
    gradients_kept(j, ctx, fix, bad, ref)
    if not j.failure:
        formula(j, ctx, inputs, ref, guarded)
    if not j.failure:
        _precision(j, ctx, inputs, bad, fix, ref, guarded)


def benign(j: Judgement, ctx: ReproContext) -> Optional[str]:
    """Away from the hazard both sides are finite and the fix gives the mathematics' values,
    whatever its safety: on the benign inputs and on each further set (`Repro.shapes`: other
    shapes and scales). Returns a failure verdict or None."""
    if ctx.repro.benign is None:
        return None
    for label, build in (("benign", ctx.repro.benign),) + tuple((f"benign {what}", b) for what, b in ctx.repro.shapes):
        verdict = _benign_set(j, ctx, label, build(ctx))
        if verdict:
            return verdict
    return None


def _benign_set(j: Judgement, ctx: ReproContext, label: str, inputs: Inputs) -> Optional[str]:
    bad, fix = run_pair(ctx, inputs)
    j.numbers[label] = {"original": bad.counts(), "fix": fix.counts()}
    if not bad.finite:
        j.evidence.append(f"{label} inputs are not benign: {bad.describe()}")
        j.fail(f"{label} inputs are not benign")
        return NOT_REPRODUCED
    if not fix.finite:
        j.evidence.append(f"{label}: {fix.describe()}")
        j.fail(f"the fix is not finite on {label} inputs")
        return FIX_FAILED
    sub = Judgement()
    judge(sub, ctx, inputs, bad, fix, guarded=False)
    j.evidence += [f"{label}: " + e for e in sub.evidence]
    if sub.failure:
        j.fail(f"{label} inputs: " + sub.failure)
        return FIX_FAILED
    return None


def adversarial(ctx: ReproContext) -> Inputs:
    """The inputs at the hazard, which every check but WARN needs."""
    if ctx.repro.adversarial is None:
        raise ReproError(f"{ctx.info.code} example {ctx.repro.example + 1}: no adversarial inputs are declared")
    return ctx.repro.adversarial(ctx)


def finish(ctx: ReproContext, j: Judgement, verdict: str) -> Result:
    if verdict == CONFIRMED and j.failure:
        verdict = FIX_FAILED
    if ctx.repro.convention:
        j.evidence.append(f"where the mathematics is undefined, the reference assumes: {ctx.repro.convention}")
    return ctx.result(verdict, evidence=j.evidence, numbers=j.numbers, reason=j.failure if verdict != CONFIRMED else "")
