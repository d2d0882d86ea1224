"""The verdict checks, one per oracle (`Repro.oracle`): what each oracle expects of the original
and of the fix, with the numbers it measured. How a fix is compared with the float64 reference is
`judging.py`; how verdicts read is `verify_format.py`.

- NF: the original gives NaN/Inf (forward or a gradient) on the adversarial inputs; the fix is finite;
- WV: the original is finite but wrong against the float64 reference; the fix is right;
- ERR: the original raises (the expected error); the fix runs and is finite;
- ZG: the original's gradients are silently exactly 0; the fix has fewer zeros;
- WARN: the original warns (a deprecated API); the fix does not, and a SAFE fix keeps the values.
"""

from __future__ import annotations

from typing import Callable, Dict

from torchnumlint.runtime_check import oracles
from torchnumlint.runtime_check.context import Inputs, ReproContext
from torchnumlint.runtime_check.judging import (
    Judgement,
    adversarial,
    benign,
    finish,
    formula,
    gradients_kept,
    judge,
    reference,
    run_pair,
    skip_unsupported,
)
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, Outcome, Result


def check_nf(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = adversarial(ctx)
    bad, fix = run_pair(ctx, inputs)
    skip = skip_unsupported(ctx, bad)
    if skip:
        return skip
    j.numbers["original"], j.numbers["fix"] = bad.counts(), fix.counts()
    j.evidence.append(bad.describe())
    if not bad.ok:
        j.fail("the original raised")
        return finish(ctx, j, NOT_REPRODUCED)
    if bad.finite:
        j.fail("the original stays finite on the adversarial inputs")
        return finish(ctx, j, NOT_REPRODUCED)
    return _judge_guarded_fix(ctx, j, inputs, bad, fix, "the fix is not finite")


def _judge_guarded_fix(ctx: ReproContext, j: Judgement, inputs: Inputs, bad: Outcome, fix: Outcome, not_finite: str) -> Result:
    """The end of an oracle whose original failed as it should: the fix must be finite
    (`not_finite` says how it failed) and equal the float64 reference where the guard is idle."""
    j.evidence.append(fix.describe())
    if not fix.finite:
        j.fail(not_finite)
        return finish(ctx, j, FIX_FAILED)
    judge(j, ctx, inputs, bad, fix, guarded=True)
    return finish(ctx, j, (None if j.failure else benign(j, ctx)) or CONFIRMED)


def check_wv(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = adversarial(ctx)
    bad, fix = run_pair(ctx, inputs)
    skip = skip_unsupported(ctx, bad)
    if skip:
        return skip
    ref = reference(ctx, inputs)
    j.numbers["original"], j.numbers["fix"], j.numbers["reference"] = bad.counts(), fix.counts(), ref.counts()
    if not ref.finite:
        j.evidence.append(ref.describe())
        j.fail("the float64 reference is not finite")
        return finish(ctx, j, NOT_REPRODUCED)
    if not bad.finite:
        j.evidence.append(bad.describe())
        j.fail("the original is not finite (WV expects finite but wrong)")
        return finish(ctx, j, NOT_REPRODUCED)
    err_bad = oracles.worst(oracles.compare(bad, ref))
    assert err_bad is not None  # both ran and are finite: there are values to compare
    wrong = ctx.tol * oracles.WRONG_FACTOR
    j.numbers["error_original"] = err_bad
    j.evidence.append(f"original vs float64 reference: {err_bad.describe()} (wrong above {wrong:.2g})")
    if err_bad.rel <= wrong:
        j.fail("the original agrees with the float64 reference")
        return finish(ctx, j, NOT_REPRODUCED)
    if not fix.finite:
        j.evidence.append(fix.describe())
        j.fail("the fix is not finite")
        return finish(ctx, j, FIX_FAILED)
    gradients_kept(j, ctx, fix, bad, ref)
    if not j.failure:
        formula(j, ctx, inputs, ref, guarded=False)
    if not j.failure:
        err_fix = oracles.worst(oracles.compare(fix, ref))
        assert err_fix is not None  # both ran and are finite: there are values to compare
        j.numbers["error_fix"] = err_fix
        j.evidence.append(f"fix vs float64 reference: {err_fix.describe()} (tol {ctx.tol:.2g})")
        if err_fix.rel > ctx.tol:
            j.fail("the fix is wrong against the float64 reference")
    return finish(ctx, j, (None if j.failure else benign(j, ctx)) or CONFIRMED)


def check_err(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = adversarial(ctx)
    bad, fix = run_pair(ctx, inputs)
    j.numbers["original"], j.numbers["fix"] = bad.counts(), fix.counts()
    j.evidence.append(bad.describe())
    if bad.ok:
        j.fail("the original did not raise")
        return finish(ctx, j, NOT_REPRODUCED)
    match = ctx.repro.error_match
    if match and match not in (bad.error or ""):
        j.fail(f"the original raised, but not the expected error ({match!r})")
        return finish(ctx, j, NOT_REPRODUCED)
    return _judge_guarded_fix(ctx, j, inputs, bad, fix, "the fix raises or is not finite")


def check_zg(ctx: ReproContext) -> Result:
    j = Judgement()
    bad, fix = run_pair(ctx, adversarial(ctx))
    skip = skip_unsupported(ctx, bad)
    if skip:
        return skip
    if not bad.ok or not fix.ok:
        j.evidence += [bad.describe(), fix.describe()]
        j.fail("raised")
        return finish(ctx, j, NOT_REPRODUCED if not bad.ok else FIX_FAILED)
    zb = [oracles.zero_count(f"original grad {n}", g) for n, g in bad.grads.items()]
    zf = [oracles.zero_count(f"fix grad {n}", g) for n, g in fix.grads.items()]
    j.numbers["original"], j.numbers["fix"] = zb, zf
    j.evidence += [z.describe() for z in zb + zf]
    gradients_kept(j, ctx, fix, bad)
    if not any(z.zeros for z in zb):
        j.fail("no gradient is exactly 0")
        return finish(ctx, j, NOT_REPRODUCED)
    if sum(z.zeros for z in zf) >= sum(z.zeros for z in zb) or not fix.finite:
        j.fail("the fix keeps the zero gradients")
    return finish(ctx, j, CONFIRMED)


def check_warn(ctx: ReproContext) -> Result:
    j = Judgement()
    inputs = ctx.repro.adversarial(ctx) if ctx.repro.adversarial else {}
    bad, fix = run_pair(ctx, inputs)
    db, df = oracles.deprecations(bad), oracles.deprecations(fix)
    j.numbers.update(
        {
            "original_deprecations": db,
            "fix_deprecations": df,
            "original_other_warnings": [w for w in bad.warnings if w not in db],
            "fix_other_warnings": [w for w in fix.warnings if w not in df],
        }
    )
    j.evidence += [
        f"original: {len(db)} deprecation warning(s)" + (f": {db[0][:160]}" if db else ""),
        f"fix: {len(df)} deprecation warning(s)" + (f": {df[0][:160]}" if df else ""),
    ]
    if not bad.ok:
        j.evidence.append(bad.describe())
    if not fix.ok:
        j.evidence.append(fix.describe())
        j.fail("the fix raised")
        return finish(ctx, j, FIX_FAILED)
    if bad.ok and bad.out is not None and fix.out is not None:
        same = oracles.worst(oracles.compare(fix, bad))
        if same is not None:
            j.numbers["fix_vs_original"] = same
            j.evidence.append(f"values: fix vs original {same.describe()} (tol {ctx.tol:.2g})")
            if same.rel > ctx.tol and ctx.fix_safety == "SAFE":
                j.fail("the SAFE fix changes the values")
                return finish(ctx, j, FIX_FAILED)
    if not db:
        j.fail("no deprecation warning")
        return finish(ctx, j, NOT_REPRODUCED)
    if df:
        j.fail("the fix still warns")
    return finish(ctx, j, CONFIRMED)


CHECKS: Dict[str, Callable[[ReproContext], Result]] = {
    "NF": check_nf,
    "WV": check_wv,
    "ERR": check_err,
    "ZG": check_zg,
    "WARN": check_warn,
}
