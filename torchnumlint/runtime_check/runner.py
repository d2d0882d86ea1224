"""Run the reproductions: every selected rule x example x device x dtype gets a verdict with its numbers.

`verify(select, device, dtypes)` returns a list of `oracles.Result` (`verify_format.py` renders
them as text, JSON or markdown); `exit_code` is 0 only when every result is CONFIRMED or
legitimately SKIPPED. Per rule, verify first lints every example with the real engine and applies the real fixes
(`linted.py`): one "FIX" result says whether each fix equals the pinned text, and the runs use the
fixer's text, never the pin. The reproductions (`repros/`) declare what to run and the mathematics
to judge by; `checks.py` holds the verdict check of each oracle, `judging.py` how a fix is judged
against the float64 reference.
"""

from __future__ import annotations

import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

import torchnumlint.catalogue as catalogue
from torchnumlint.runtime_check.checks import CHECKS
from torchnumlint.runtime_check.context import Repro, ReproContext, ReproError
from torchnumlint.runtime_check.linted import Fixed, Fixer, real_fixes
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, SKIPPED, Result
from torchnumlint.runtime_check.repros import REPROS


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
    return Result(
        info.code,
        info.name,
        device,
        "-",
        "FIX",
        info.safety,
        FIX_FAILED if failed else CONFIRMED,
        evidence=[f.describe() for f in fixes],
        reason=f"{len(failed)} of {len(fixes)} examples: the linter's fix is not the pinned one" if failed else "",
        threshold=f"the linter run on all {len(fixes)} examples, fixes applied",
    )


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
            results.append(
                Result(code, info.name, where, "-", "-", info.safety, NOT_REPRODUCED, reason="no reproduction is registered for this rule")
            )
            continue
        for repro in repros[code]:
            wanted = [d for d in repro.dtypes if dtypes is None or d in dtypes]
            if not wanted:
                results.append(
                    Result(
                        code,
                        info.name,
                        where,
                        ",".join(dtypes or ()),
                        repro.oracle,
                        info.safety,
                        SKIPPED,
                        example=repro.example + 1,
                        reason=f"dtype not applicable (this rule runs in {', '.join(repro.dtypes)})",
                    )
                )
                continue
            for dtype_name in wanted:
                if dev is None:
                    results.append(
                        Result(
                            code, info.name, device, dtype_name, repro.oracle, info.safety, SKIPPED, example=repro.example + 1, reason=why
                        )
                    )
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
