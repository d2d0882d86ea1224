"""What a run is asked to do and what it produces: plain data, so that the reporters read it
without importing the engine (or libcst).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from torchnumlint.findings import Finding
from torchnumlint.fix_policy import FixPolicy
from torchnumlint.record import Record
from torchnumlint.sourcefile import SourceFile


class Options(Record):
    __slots__ = _fields = (
        "fix",
        "unsafe_fixes",
        "diff",
        "strict",
        "jobs",
        "cache",
        "cache_dir",
        "timeout",
        "write",
        "force_exclude",
        "fix_policy",
    )
    fix: bool
    unsafe_fixes: Optional[bool]  # None: as each file's config says
    diff: bool
    strict: Optional[bool]  # also findings without evidence; None: as each file's config says
    jobs: Optional[int]  # worker processes; None: every file in this process, one after another
    cache: bool  # answer unchanged files from the cache (and fill it)
    cache_dir: Optional[str]  # None: `.torchnumlint_cache` in each file's project root
    timeout: Optional[float]  # seconds a worker may spend on one file before it is that file's error
    write: bool  # False: a fixed text is kept in the outcome, not written (standard input)
    force_exclude: bool  # files named explicitly are excluded too (ruff's --force-exclude)
    fix_policy: FixPolicy  # the file's config's fixable/unfixable/extend-*-fixes

    def __init__(
        self,
        fix: bool = False,
        unsafe_fixes: Optional[bool] = None,
        diff: bool = False,
        strict: Optional[bool] = None,
        jobs: Optional[int] = None,
        cache: bool = False,
        cache_dir: Optional[str] = None,
        timeout: Optional[float] = 120.0,
        write: bool = True,
        force_exclude: bool = False,
        fix_policy: FixPolicy = FixPolicy(),
    ) -> None:
        self.fix, self.unsafe_fixes, self.diff, self.strict, self.jobs, self.cache = fix, unsafe_fixes, diff, strict, jobs, cache
        self.cache_dir, self.timeout, self.write, self.force_exclude, self.fix_policy = cache_dir, timeout, write, force_exclude, fix_policy


class FileOutcome(Record):
    __slots__ = _fields = ("findings", "errors", "fixed", "fixed_codes", "diff", "text", "cacheable")
    findings: List[Finding]
    errors: List[str]
    fixed: int
    fixed_codes: List[Tuple[str, str]]  # (code, name) of each fix applied
    diff: str
    text: Optional[str]  # the fixed text (written unless Options.write is False)
    cacheable: bool  # False after an internal error: the next run tries again

    def __init__(
        self,
        findings: Optional[List[Finding]] = None,
        errors: Optional[List[str]] = None,
        fixed: int = 0,
        fixed_codes: Optional[List[Tuple[str, str]]] = None,
        diff: str = "",
        text: Optional[str] = None,
        cacheable: bool = True,
    ) -> None:
        self.findings = [] if findings is None else findings
        self.errors = [] if errors is None else errors
        self.fixed, self.fixed_codes = fixed, [] if fixed_codes is None else fixed_codes
        self.diff, self.text, self.cacheable = diff, text, cacheable


class RunResult(Record):
    __slots__ = _fields = ("findings", "errors", "fixed", "fixed_by_file", "diffs", "found", "files", "unsafe_fixes", "sources")
    findings: List[Finding]
    errors: List[str]
    fixed: int
    fixed_by_file: Dict[str, List[Tuple[str, str]]]  # --show-fixes
    diffs: List[str]
    found: int  # files the paths gave (0: nothing was linted, which is no clean result)
    files: int
    unsafe_fixes: bool  # unsafe fixes were on for every file (the report calls them fixable)
    # the text a path's findings refer to where it is not the file on disk (standard input)
    sources: Dict[str, SourceFile]

    def __init__(
        self,
        findings: Optional[List[Finding]] = None,
        errors: Optional[List[str]] = None,
        fixed: int = 0,
        fixed_by_file: Optional[Dict[str, List[Tuple[str, str]]]] = None,
        diffs: Optional[List[str]] = None,
        found: int = 0,
        files: int = 0,
        unsafe_fixes: bool = False,
        sources: Optional[Dict[str, SourceFile]] = None,
    ) -> None:
        self.findings = [] if findings is None else findings
        self.errors = [] if errors is None else errors
        self.fixed, self.fixed_by_file = fixed, {} if fixed_by_file is None else fixed_by_file
        self.diffs = [] if diffs is None else diffs
        self.found, self.files, self.unsafe_fixes = found, files, unsafe_fixes
        self.sources = {} if sources is None else sources
