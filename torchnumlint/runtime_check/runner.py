"""Run the reproductions: every selected rule x example x device x dtype gets a verdict with its numbers.

`verify(select, device, dtypes)` returns a list of `oracles.Result` (`verify_format.py` renders
them as text, JSON or markdown); `exit_code` is 0 only when every result is CONFIRMED or
legitimately SKIPPED. Per rule, verify first lints every example with the real engine and applies the real fixes
(`linted.py`): one "FIX" result says whether each fix equals the pinned text, and the runs use the
fixer's text, never the pin. The reproductions (`repros/`) declare what to run and the mathematics
to judge by; the generic checks here (one per oracle) judge a fix three ways:

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
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

import torchnumlint.catalogue as catalogue
from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext, ReproError
from torchnumlint.runtime_check.linted import Fixed, Fixer, real_fixes
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, SKIPPED, Outcome, Result
from torchnumlint.runtime_check.repros import REPROS


def _unsupported(outcome: Outcome) -> bool:
    msg = outcome.error or ""
    return "not implemented for" in msg or "not supported" in msg.lower() and "dtype" in msg.lower()


def _run_pair(ctx: ReproContext, inputs: Inputs) -> Tuple[Outcome, Outcome]:
    bad = oracles.run("original", ctx.load("bad"), inputs, ctx.repro.grad)
    fix = oracles.run("fix", ctx.load(ctx.repro.fixed_from), inputs, ctx.repro.grad)
    return bad, fix


def _skip_unsupported(ctx: ReproContext, outcome: Outcome) -> Optional[Result]:
    if not outcome.ok and _unsupported(outcome):
        return ctx.result(SKIPPED, reason=f"{ctx.dtype_name} unsupported on {ctx.device.type}: {outcome.error}")
    return None


def _float64(inputs: Inputs) -> Inputs:
    return {k: (v.detach().to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for k, v in inputs.items()}


class Judgement:
    """The evidence and numbers of one check, and its first failure."""

    def __init__(self) -> None:
        self.evidence: List[str] = []
        self.numbers: Dict[str, object] = {}
        self.failure = ""

    def fail(self, why: str) -> None:
        self.failure = self.failure or why


def _reference(ctx: ReproContext, inputs: Inputs) -> Outcome:
    """The rule's mathematics in float64 on the run's inputs (rounded to the run's dtype first)."""
    if ctx.repro.reference is None:
        raise ReproError(f"{ctx.info.code} example {ctx.repro.example + 1}: no float64 reference is declared")
    return oracles.run("float64 reference", ctx.repro.reference, _float64(inputs), ctx.repro.grad)


def _gradients_kept(j: Judgement, ctx: ReproContext, fix: Outcome, *others: Outcome) -> None:
    given = {n for o in others for n, g in o.grads.items() if g is not None}
    dropped = sorted(n for n in given if fix.grads.get(n) is None)
    if dropped:
        j.fail(f"the fix drops the gradient of {', '.join(dropped)} (the original or the mathematics has one)")


def _within(name: str, a: torch.Tensor, ref: torch.Tensor, mask: Optional[torch.Tensor], tol: float,
            bound=None, floor: float = 0.0) -> Tuple[bool, str, Optional[float]]:
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


def _formula(j: Judgement, ctx: ReproContext, inputs, ref: Outcome, guarded: bool) -> None:
    """The fix's own code in float64 against the reference: the mathematics of the fix."""
    fix64 = oracles.run("fix in float64", ctx.load(ctx.repro.fixed_from, dtype=torch.float64), _float64(inputs),
                        ctx.repro.grad)
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
        j.evidence.append(f"fix in float64 is within the stated bound of the reference, not equal to it "
                          f"({', '.join(needed)} of the reference's largest value; {bound.why if bound else ''})")
    else:
        j.evidence.append(f"fix in float64 equals the reference (tol {tol:.2g})")


def _precision(j: Judgement, ctx: ReproContext, inputs, bad: Outcome, fix: Outcome, ref: Outcome,
               guarded: bool) -> None:
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
    in_dtype = oracles.run("reference in the run's dtype", ctx.repro.reference, inputs, ctx.repro.grad,
                           ctx.autocast_region)
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
        why = (f"original's own error {orig_err:.2g}, the mathematics' in {ctx.dtype_name} {math_err:.2g}, "
               f"the forward's rounding {carried:.2g}")
        if not ok:
            j.evidence.append(f"{name}: where the original is finite, fix vs reference {text}; {why}")
            j.fail(f"the fix is off the float64 reference in {ctx.dtype_name} where the original is finite")
            return
        rest = ~finite
        if bool(rest.any()):
            ok, text, bounded = _within(name, ff[name], r, rest, allowance, bound, floor)
            undefined = int((rest & ~torch.isfinite(r.detach()).cpu()).sum())
            note = f"; {undefined} entries where the mathematics itself is undefined are not compared" if undefined else ""
            j.evidence.append(f"{name}: where the original is not finite ({int(rest.sum())} entries) the fix "
                              f"{'differs from the original by necessity and ' if ok else ''}"
                              f"{_agreement(ok, bounded)}: {text}{note}" + ("" if ok else f"; {why}"))
            if not ok:
                j.fail(f"the fix is wrong where the original is not finite ({name})")
                return
    j.evidence.append(f"fix in {ctx.dtype_name} agrees with the float64 reference (within 4 ulps beyond the "
                      "original's error where finite, or the mathematics' own error in this dtype)")


def _forward_rounding(ctx: ReproContext, reference_fields: Dict[str, torch.Tensor]) -> float:
    """Half an ulp of the run's dtype at the largest finite magnitude of the forward."""
    forward = reference_fields.get("forward")
    if forward is None:
        return 0.0
    finite = forward[torch.isfinite(forward)]
    return 0.5 * torch.finfo(ctx.compute_dtype).eps * float(finite.abs().max()) if finite.numel() else 0.0


def _judge(j: Judgement, ctx: ReproContext, inputs, bad: Outcome, fix: Outcome, guarded: bool) -> None:
    ref = _reference(ctx, inputs)
    if not ref.ok:
        raise ReproError(f"the float64 reference raised: {ref.error}")
    _gradients_kept(j, ctx, fix, bad, ref)
    if not j.failure:
        _formula(j, ctx, inputs, ref, guarded)
    if not j.failure:
        _precision(j, ctx, inputs, bad, fix, ref, guarded)


def _benign(j: Judgement, ctx: ReproContext) -> Optional[str]:
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
    bad, fix = _run_pair(ctx, inputs)
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
    _judge(sub, ctx, inputs, bad, fix, guarded=False)
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


def _finish(ctx: ReproContext, j: Judgement, verdict: str) -> Result:
    if verdict == CONFIRMED and j.failure:
        verdict = FIX_FAILED
    if ctx.repro.convention:
        j.evidence.append(f"where the mathematics is undefined, the reference assumes: {ctx.repro.convention}")
    return ctx.result(verdict, evidence=j.evidence, numbers=j.numbers, reason=j.failure if verdict != CONFIRMED else "")


def check_nf(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = adversarial(ctx)
    bad, fix = _run_pair(ctx, inputs)
    skip = _skip_unsupported(ctx, bad)
    if skip:
        return skip
    j.numbers["original"], j.numbers["fix"] = bad.counts(), fix.counts()
    j.evidence.append(bad.describe())
    if not bad.ok:
        j.fail("the original raised")
        return _finish(ctx, j, NOT_REPRODUCED)
    if bad.finite:
        j.fail("the original stays finite on the adversarial inputs")
        return _finish(ctx, j, NOT_REPRODUCED)
    j.evidence.append(fix.describe())
    if not fix.finite:
        j.fail("the fix is not finite")
        return _finish(ctx, j, FIX_FAILED)
    _judge(j, ctx, inputs, bad, fix, guarded=True)
    return _finish(ctx, j, (None if j.failure else _benign(j, ctx)) or CONFIRMED)


def check_wv(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = adversarial(ctx)
    bad, fix = _run_pair(ctx, inputs)
    skip = _skip_unsupported(ctx, bad)
    if skip:
        return skip
    ref = _reference(ctx, inputs)
    j.numbers["original"], j.numbers["fix"], j.numbers["reference"] = bad.counts(), fix.counts(), ref.counts()
    if not ref.finite:
        j.evidence.append(ref.describe())
        j.fail("the float64 reference is not finite")
        return _finish(ctx, j, NOT_REPRODUCED)
    if not bad.finite:
        j.evidence.append(bad.describe())
        j.fail("the original is not finite (WV expects finite but wrong)")
        return _finish(ctx, j, NOT_REPRODUCED)
    err_bad = oracles.worst(oracles.compare(bad, ref))
    assert err_bad is not None  # both ran and are finite: there are values to compare
    wrong = ctx.tol * oracles.WRONG_FACTOR
    j.numbers["error_original"] = err_bad
    j.evidence.append(f"original vs float64 reference: {err_bad.describe()} (wrong above {wrong:.2g})")
    if err_bad.rel <= wrong:
        j.fail("the original agrees with the float64 reference")
        return _finish(ctx, j, NOT_REPRODUCED)
    if not fix.finite:
        j.evidence.append(fix.describe())
        j.fail("the fix is not finite")
        return _finish(ctx, j, FIX_FAILED)
    _gradients_kept(j, ctx, fix, bad, ref)
    if not j.failure:
        _formula(j, ctx, inputs, ref, guarded=False)
    if not j.failure:
        err_fix = oracles.worst(oracles.compare(fix, ref))
        assert err_fix is not None  # both ran and are finite: there are values to compare
        j.numbers["error_fix"] = err_fix
        j.evidence.append(f"fix vs float64 reference: {err_fix.describe()} (tol {ctx.tol:.2g})")
        if err_fix.rel > ctx.tol:
            j.fail("the fix is wrong against the float64 reference")
    return _finish(ctx, j, (None if j.failure else _benign(j, ctx)) or CONFIRMED)


def check_err(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = adversarial(ctx)
    bad, fix = _run_pair(ctx, inputs)
    j.numbers["original"], j.numbers["fix"] = bad.counts(), fix.counts()
    j.evidence.append(bad.describe())
    if bad.ok:
        j.fail("the original did not raise")
        return _finish(ctx, j, NOT_REPRODUCED)
    match = ctx.repro.error_match
    if match and match not in (bad.error or ""):
        j.fail(f"the original raised, but not the expected error ({match!r})")
        return _finish(ctx, j, NOT_REPRODUCED)
    j.evidence.append(fix.describe())
    if not fix.finite:
        j.fail("the fix raises or is not finite")
        return _finish(ctx, j, FIX_FAILED)
    _judge(j, ctx, inputs, bad, fix, guarded=True)
    return _finish(ctx, j, (None if j.failure else _benign(j, ctx)) or CONFIRMED)


def check_zg(ctx: ReproContext) -> Result:
    j = Judgement()
    bad, fix = _run_pair(ctx, adversarial(ctx))
    skip = _skip_unsupported(ctx, bad)
    if skip:
        return skip
    if not bad.ok or not fix.ok:
        j.evidence += [bad.describe(), fix.describe()]
        j.fail("raised")
        return _finish(ctx, j, NOT_REPRODUCED if not bad.ok else FIX_FAILED)
    zb = [oracles.zero_count(f"original grad {n}", g) for n, g in bad.grads.items()]
    zf = [oracles.zero_count(f"fix grad {n}", g) for n, g in fix.grads.items()]
    j.numbers["original"], j.numbers["fix"] = zb, zf
    j.evidence += [z.describe() for z in zb + zf]
    _gradients_kept(j, ctx, fix, bad)
    if not any(z.zeros for z in zb):
        j.fail("no gradient is exactly 0")
        return _finish(ctx, j, NOT_REPRODUCED)
    if sum(z.zeros for z in zf) >= sum(z.zeros for z in zb) or not fix.finite:
        j.fail("the fix keeps the zero gradients")
    return _finish(ctx, j, CONFIRMED)


def check_warn(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = ctx.repro.adversarial(ctx) if ctx.repro.adversarial else {}
    bad, fix = _run_pair(ctx, inputs)
    db, df = oracles.deprecations(bad), oracles.deprecations(fix)
    j.numbers.update({"original_deprecations": db, "fix_deprecations": df,
                      "original_other_warnings": [w for w in bad.warnings if w not in db],
                      "fix_other_warnings": [w for w in fix.warnings if w not in df]})
    j.evidence += [f"original: {len(db)} deprecation warning(s)" + (f": {db[0][:160]}" if db else ""),
                   f"fix: {len(df)} deprecation warning(s)" + (f": {df[0][:160]}" if df else "")]
    if not bad.ok:
        j.evidence.append(bad.describe())
    if not fix.ok:
        j.evidence.append(fix.describe())
        j.fail("the fix raised")
        return _finish(ctx, j, FIX_FAILED)
    if bad.ok and bad.out is not None and fix.out is not None:
        same = oracles.worst(oracles.compare(fix, bad))
        if same is not None:
            j.numbers["fix_vs_original"] = same
            j.evidence.append(f"values: fix vs original {same.describe()} (tol {ctx.tol:.2g})")
            if same.rel > ctx.tol and ctx.fix_safety == "SAFE":
                j.fail("the SAFE fix changes the values")
                return _finish(ctx, j, FIX_FAILED)
    if not db:
        j.fail("no deprecation warning")
        return _finish(ctx, j, NOT_REPRODUCED)
    if df:
        j.fail("the fix still warns")
    return _finish(ctx, j, CONFIRMED)


CHECKS: Dict[str, Callable[[ReproContext], Result]] = {
    "NF": check_nf, "WV": check_wv, "ERR": check_err, "ZG": check_zg, "WARN": check_warn,
}


# ---- selection and the run -----------------------------------------------------------------------


def resolve_device(device: str) -> Tuple[Optional[torch.device], str]:
    """(device, "") or (None, why it is skipped)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu"), ""
    if device == "cpu":
        return torch.device("cpu"), ""
    if device == "cuda":
        if torch.cuda.is_available():
            return torch.device("cuda"), ""
        return None, "CUDA is not available on this machine (torch.cuda.is_available() is False)"
    raise ValueError(f"unknown device {device!r} (auto, cpu, cuda)")


def describe_device(device: torch.device) -> str:
    """The device in words, for the record: the GPU's name, or the CPU's architecture."""
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    import platform

    return f"cpu: {platform.machine()} ({platform.processor() or platform.system()}), {torch.get_num_threads()} threads"


def select_codes(codes: Iterable[str], select: Optional[Sequence[str]]) -> List[str]:
    """Codes matching any of `select` (exact codes or prefixes such as TNL1); all when None."""
    codes = list(codes)
    if not select:
        return codes
    wanted = [s.strip().upper() for s in select if s.strip()]
    return [c for c in codes if any(c.startswith(w) for w in wanted)]


def fix_result(info: catalogue.RuleInfo, device: str, fixes: Sequence[Fixed]) -> Result:
    """The rule's "FIX" row: does the linter's fix of every example equal the pinned text?"""
    failed = [f for f in fixes if not f.ok]
    return Result(info.code, info.name, device, "-", "FIX", info.safety, FIX_FAILED if failed else CONFIRMED,
                  evidence=[f.describe() for f in fixes],
                  reason=f"{len(failed)} of {len(fixes)} examples: the linter's fix is not the pinned one" if failed else "",
                  threshold=f"the linter run on all {len(fixes)} examples, fixes applied")


def verify(
    select: Optional[Sequence[str]] = None,
    device: str = "auto",
    dtypes: Optional[Sequence[str]] = None,
    rules: Optional[Dict[str, catalogue.RuleInfo]] = None,
    repros: Optional[Dict[str, Tuple[Repro, ...]]] = None,
    fixer: Fixer = real_fixes,
) -> List[Result]:
    """Per selected rule: the FIX row, then each reproduced example in each applicable dtype, run
    with the text `fixer` (the real linter) made of it. Rules marked `meta` (TNL900 unused-noqa,
    about the linter's own comments) have no numerical hazard and nothing to prove here."""
    rules = catalogue.load() if rules is None else rules
    rules = {code: info for code, info in rules.items() if not info.meta}  # no numerical hazard to prove
    repros = REPROS if repros is None else repros
    dev, why = resolve_device(device)
    where = device if dev is None else str(dev)
    results: List[Result] = []
    for code in select_codes(rules, select):
        info = rules[code]
        fixes = fixer(info)
        results.append(fix_result(info, where, fixes))
        if not repros.get(code):
            results.append(Result(code, info.name, where, "-", "-", info.safety, NOT_REPRODUCED,
                                  reason="no reproduction is registered for this rule"))
            continue
        for repro in repros[code]:
            wanted = [d for d in repro.dtypes if dtypes is None or d in dtypes]
            if not wanted:
                results.append(Result(code, info.name, where, ",".join(dtypes or ()), repro.oracle, info.safety,
                                      SKIPPED, example=repro.example + 1,
                                      reason=f"dtype not applicable (this rule runs in {', '.join(repro.dtypes)})"))
                continue
            for dtype_name in wanted:
                if dev is None:
                    results.append(Result(code, info.name, device, dtype_name, repro.oracle, info.safety, SKIPPED,
                                          example=repro.example + 1, reason=why))
                    continue
                results.append(run_one(ReproContext(info, repro, dev, dtype_name, fixes[repro.example].text)))
    return results


def run_one(ctx: ReproContext) -> Result:
    start = time.perf_counter()
    try:
        why = ctx.repro.skip(ctx) if ctx.repro.skip else None
        if why:
            result = ctx.result(SKIPPED, reason=why)
        elif ctx.repro.custom is not None:
            result = ctx.repro.custom(ctx)
        else:
            result = CHECKS[ctx.repro.oracle](ctx)
    except ReproError as exc:
        result = ctx.result(NOT_REPRODUCED, reason=f"the reproduction cannot run: {exc}")
    except Exception as exc:  # the harness itself failed: report it, never crash the whole run
        result = ctx.result(NOT_REPRODUCED, reason=f"reproduction crashed: {type(exc).__name__}: {exc}")
    result.numbers["seconds"] = round(time.perf_counter() - start, 3)
    return result


def exit_code(results: Sequence[Result]) -> int:
    return 0 if all(r.passed for r in results) else 1
