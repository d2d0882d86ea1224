"""Run the reproductions: every selected rule x device x dtype gets a verdict with its numbers.

`verify(select, device, dtypes)` returns a list of `oracles.Result`; `format_text` / `format_json`
render them; `exit_code` is 0 only when every result is CONFIRMED or legitimately SKIPPED. The
reproductions (`repros/`) declare what to run; the generic checks here (one per oracle) run a
reproduction's `bad` text and its pinned `fixed` text through a `context.ReproContext`.
"""

from __future__ import annotations

import json
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from torchnumlint.runtime_check import catalogue, oracles
from torchnumlint.runtime_check.context import Repro, ReproContext, ReproError
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, SKIPPED, Result
from torchnumlint.runtime_check.repros import REPROS


def _unsupported(outcome: oracles.Outcome) -> bool:
    msg = outcome.error or ""
    return "not implemented for" in msg or "not supported" in msg.lower() and "dtype" in msg.lower()


def _run_pair(ctx: ReproContext, inputs: Dict[str, torch.Tensor]) -> Tuple[oracles.Outcome, oracles.Outcome]:
    bad = oracles.run("original", ctx.load("bad"), inputs, ctx.repro.grad, ctx.autocast)
    fix = oracles.run("fix", ctx.load(ctx.repro.fixed_from), inputs, ctx.repro.grad, ctx.autocast)
    return bad, fix


def _skip_unsupported(ctx: ReproContext, outcome: oracles.Outcome) -> Optional[Result]:
    if not outcome.ok and _unsupported(outcome):
        return ctx.result(SKIPPED, reason=f"{ctx.dtype_name} unsupported on {ctx.device.type}: {outcome.error}")
    return None


def _reference(ctx: ReproContext, inputs: Dict[str, torch.Tensor], side: str = "bad") -> oracles.Outcome:
    """`side`'s code run in float64 (no autocast) on the same inputs."""
    return oracles.run("float64 reference", ctx.load(side), _float64(inputs), ctx.repro.grad)


def _safety(ctx: ReproContext, label: str, fix: oracles.Outcome, bad: oracles.Outcome,
            inputs: Dict[str, torch.Tensor], evidence: List[str], numbers: Dict) -> bool:
    """Where the original is finite, does the fix give the same values? Appends the evidence;
    returns False when it does not."""
    ref = _reference(ctx, inputs) if ctx.dtype_name != "float64" else None
    checks = oracles.fix_safety(fix, bad, ref, ctx.tol)
    numbers[f"{label}_safety"] = checks
    failing = [c for c in checks if not c.ok]
    shown = failing[0] if failing else max(checks, key=lambda c: c.fix_vs_original.rel, default=None)
    if shown is not None:
        where = "where the original is finite" if label == "adversarial" else "benign"
        evidence.append(f"{where}: fix vs original {shown.describe()} (tol {ctx.tol:g})")
    return not failing


def _benign(ctx: ReproContext, evidence: List[str], numbers: Dict) -> Optional[str]:
    """Run both sides on the benign inputs. Returns a failure verdict or None; appends evidence."""
    if ctx.repro.benign is None:
        return None
    inputs = ctx.repro.benign(ctx)
    bad, fix = _run_pair(ctx, inputs)
    numbers["benign"] = {"original": bad.counts(), "fix": fix.counts()}
    if not bad.finite:
        evidence.append(f"benign inputs are not benign: {bad.describe()}")
        return NOT_REPRODUCED
    if not fix.finite:
        evidence.append(f"benign: {fix.describe()}")
        return FIX_FAILED
    if not ctx.repro.check_benign_equal:
        w = oracles.worst(oracles.compare(fix, bad))
        if w is not None:
            evidence.append(f"benign: both finite; fix vs original {w.describe()} "
                            f"(not required equal: {ctx.fix_safety})")
        return None
    same = _safety(ctx, "benign", fix, bad, inputs, evidence, numbers)
    if not same and ctx.fix_safety == "SAFE":
        evidence.append("the SAFE fix changes finite values on benign inputs")
        return FIX_FAILED
    return None


def check_nf(ctx: ReproContext) -> Result:
    evidence: List[str] = []
    numbers: Dict[str, object] = {}
    inputs = ctx.repro.adversarial(ctx)
    bad, fix = _run_pair(ctx, inputs)
    skip = _skip_unsupported(ctx, bad)
    if skip:
        return skip
    numbers["original"] = bad.counts()
    numbers["fix"] = fix.counts()
    evidence.append(bad.describe())
    if not bad.ok:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="the original raised")
    if bad.finite:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers,
                          reason="the original stays finite on the adversarial inputs")
    evidence.append(fix.describe())
    if not fix.finite:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix is not finite")
    verdict = CONFIRMED
    reason = ""
    if not _safety(ctx, "adversarial", fix, bad, inputs, evidence, numbers):
        if ctx.fix_safety == "SAFE":
            verdict, reason = FIX_FAILED, "the SAFE fix changes values where the original is finite"
        else:
            evidence.append(f"the fix changes finite values (allowed: {ctx.fix_safety})")
    benign = _benign(ctx, evidence, numbers)
    if benign and verdict == CONFIRMED:
        verdict = benign
        reason = "benign inputs"
    return ctx.result(verdict, evidence=evidence, numbers=numbers, reason=reason)


def _float64(inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {k: (v.detach().to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for k, v in inputs.items()}


def check_wv(ctx: ReproContext) -> Result:
    evidence: List[str] = []
    numbers: Dict[str, object] = {}
    inputs = ctx.repro.adversarial(ctx)
    bad, fix = _run_pair(ctx, inputs)
    skip = _skip_unsupported(ctx, bad)
    if skip:
        return skip
    ref = _reference(ctx, inputs, ctx.repro.reference)
    numbers["original"], numbers["fix"], numbers["reference"] = bad.counts(), fix.counts(), ref.counts()
    if not ref.finite:
        return ctx.result(NOT_REPRODUCED, evidence=[ref.describe()], numbers=numbers,
                          reason="the float64 reference is not finite")
    if not bad.finite:
        evidence.append(bad.describe())
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers,
                          reason="the original is not finite (WV expects finite but wrong)")
    err_bad = oracles.worst(oracles.compare(bad, ref))
    err_fix = oracles.worst(oracles.compare(fix, ref)) if fix.ok else None
    numbers["error_original"], numbers["error_fix"] = err_bad, err_fix
    wrong = ctx.tol * oracles.WRONG_FACTOR
    evidence.append(f"original vs float64 reference: {err_bad.describe()} (wrong above {wrong:g})")
    if err_bad.rel <= wrong:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers,
                          reason="the original agrees with the float64 reference")
    if not fix.finite or err_fix is None:
        evidence.append(fix.describe())
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix is not finite")
    evidence.append(f"fix vs float64 reference: {err_fix.describe()} (tol {ctx.tol:g})")
    if err_fix.rel > ctx.tol:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers,
                          reason="the fix is wrong against the float64 reference")
    verdict = _benign(ctx, evidence, numbers) or CONFIRMED
    return ctx.result(verdict, evidence=evidence, numbers=numbers, reason="" if verdict == CONFIRMED else "benign inputs")


def check_err(ctx: ReproContext) -> Result:
    evidence: List[str] = []
    numbers: Dict[str, object] = {}
    bad, fix = _run_pair(ctx, ctx.repro.adversarial(ctx))
    numbers["original"], numbers["fix"] = bad.counts(), fix.counts()
    evidence.append(bad.describe())
    if bad.ok:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="the original did not raise")
    match = ctx.repro.error_match
    if match and match not in (bad.error or ""):
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers,
                          reason=f"the original raised, but not the expected error ({match!r})")
    evidence.append(fix.describe())
    if not fix.finite:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix raises or is not finite")
    verdict = _benign(ctx, evidence, numbers) or CONFIRMED
    return ctx.result(verdict, evidence=evidence, numbers=numbers, reason="" if verdict == CONFIRMED else "benign inputs")


def check_zg(ctx: ReproContext) -> Result:
    evidence: List[str] = []
    numbers: Dict[str, object] = {}
    bad, fix = _run_pair(ctx, ctx.repro.adversarial(ctx))
    skip = _skip_unsupported(ctx, bad)
    if skip:
        return skip
    if not bad.ok or not fix.ok:
        evidence += [bad.describe(), fix.describe()]
        return ctx.result(NOT_REPRODUCED if not bad.ok else FIX_FAILED, evidence=evidence, reason="raised")
    zb = [oracles.zero_count(f"original grad {n}", g) for n, g in bad.grads.items()]
    zf = [oracles.zero_count(f"fix grad {n}", g) for n, g in fix.grads.items()]
    numbers["original"], numbers["fix"] = zb, zf
    evidence += [z.describe() for z in zb + zf]
    if not any(z.zeros for z in zb):
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="no gradient is exactly 0")
    if sum(z.zeros for z in zf) >= sum(z.zeros for z in zb) or not fix.finite:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix keeps the zero gradients")
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


def check_warn(ctx: ReproContext) -> Result:
    inputs = ctx.repro.adversarial(ctx) if ctx.repro.adversarial else {}
    bad, fix = _run_pair(ctx, inputs)
    db, df = oracles.deprecations(bad), oracles.deprecations(fix)
    numbers = {"original_deprecations": db, "fix_deprecations": df,
               "original_other_warnings": [w for w in bad.warnings if w not in db],
               "fix_other_warnings": [w for w in fix.warnings if w not in df]}
    evidence = [f"original: {len(db)} deprecation warning(s)" + (f": {db[0][:160]}" if db else ""),
                f"fix: {len(df)} deprecation warning(s)" + (f": {df[0][:160]}" if df else "")]
    if not bad.ok:
        evidence.append(bad.describe())
    if not fix.ok:
        evidence.append(fix.describe())
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix raised")
    if bad.ok and bad.out is not None and fix.out is not None:
        same = oracles.worst(oracles.compare(fix, bad))
        if same is not None:
            numbers["fix_vs_original"] = same
            evidence.append(f"values: fix vs original {same.describe()} (tol {ctx.tol:g})")
            if same.rel > ctx.tol and ctx.fix_safety == "SAFE":
                return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers,
                                  reason="the SAFE fix changes the values")
    if not db:
        return ctx.result(NOT_REPRODUCED, evidence=evidence, numbers=numbers, reason="no deprecation warning")
    if df:
        return ctx.result(FIX_FAILED, evidence=evidence, numbers=numbers, reason="the fix still warns")
    return ctx.result(CONFIRMED, evidence=evidence, numbers=numbers)


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


def select_codes(codes: Iterable[str], select: Optional[Sequence[str]]) -> List[str]:
    """Codes matching any of `select` (exact codes or prefixes such as TNL1); all when None."""
    codes = list(codes)
    if not select:
        return codes
    wanted = [s.strip().upper() for s in select if s.strip()]
    return [c for c in codes if any(c.startswith(w) for w in wanted)]


def verify(
    select: Optional[Sequence[str]] = None,
    device: str = "auto",
    dtypes: Optional[Sequence[str]] = None,
    rules: Optional[Dict[str, catalogue.RuleInfo]] = None,
    repros: Optional[Dict[str, Repro]] = None,
) -> List[Result]:
    rules = catalogue.load() if rules is None else rules
    repros = REPROS if repros is None else repros
    dev, why = resolve_device(device)
    results: List[Result] = []
    for code in select_codes(rules, select):
        info = rules[code]
        repro = repros.get(code)
        if repro is None:
            results.append(Result(code, info.name, device if dev is None else str(dev), "-", "-", info.safety,
                                  NOT_REPRODUCED, reason="no reproduction is registered for this rule"))
            continue
        wanted = [d for d in repro.dtypes if dtypes is None or d in dtypes]
        if not wanted:
            results.append(Result(code, info.name, device if dev is None else str(dev), ",".join(dtypes or ()),
                                  repro.oracle, info.safety, SKIPPED,
                                  reason=f"dtype not applicable (this rule runs in {', '.join(repro.dtypes)})"))
            continue
        for dtype_name in wanted:
            if dev is None:
                results.append(Result(code, info.name, device, dtype_name, repro.oracle, info.safety, SKIPPED,
                                      reason=why))
                continue
            ctx = ReproContext(info, repro, dev, dtype_name)
            results.append(run_one(ctx))
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


LEGEND = (
    "oracles: NF = the original gives NaN/Inf in the forward or a gradient, the fix is finite and "
    "equal where the original is finite; ERR = the original raises; WV = the original is finite but "
    "wrong against a float64 reference, the fix is right; ZG = gradients silently exactly 0; "
    "WARN = the original warns (a deprecated API)"
)


def format_text(results: Sequence[Result], verbose: bool = True) -> str:
    """One verdict line per check; `verbose` adds the inputs, the evidence and the legend of the
    oracles. Quiet keeps only the verdicts (and why a check did not confirm)."""
    lines = []
    for r in results:
        head = f"{r.code}  {r.device:<6} {r.dtype:<9} {r.verdict:<15} {r.oracle:<4} {r.safety:<6} {r.name}"
        lines.append(head)
        if verbose and r.threshold:
            lines.append(f"    inputs: {r.threshold}")
        if r.reason and (verbose or r.verdict != CONFIRMED):
            lines.append(f"    why: {r.reason}")
        if verbose:
            for e in r.evidence:
                lines.append(f"    - {e}")
    counts: Dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    lines.append(f"{len(results)} checks: {summary or 'none'}")
    if verbose:
        lines.append(LEGEND)
    return "\n".join(lines)


def format_json(results: Sequence[Result]) -> str:
    return json.dumps({"results": [r.as_dict() for r in results], "exit_code": exit_code(results),
                       "torch": torch.__version__}, indent=2)
