"""What a run is asked to do and what it produces: plain data, so that the reporters read it
without importing the engine (or libcst).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from torchnumlint.findings import Finding
from torchnumlint.fix_policy import FixPolicy
from torchnumlint.sourcefile import SourceFile


@dataclass
class Options:
    fix: bool = False
    unsafe_fixes: Optional[bool] = None  # None: as each file's config says
    diff: bool = False
    strict: Optional[bool] = None  # also findings without evidence; None: as each file's config says
    jobs: Optional[int] = None  # worker processes; None: every file in this process, one after another
    cache: bool = False  # answer unchanged files from the cache (and fill it)
    cache_dir: Optional[str] = None  # None: `.torchnumlint_cache` in each file's project root
    timeout: Optional[float] = 120.0  # seconds a worker may spend on one file before it is that file's error
    write: bool = True  # False: a fixed text is kept in the outcome, not written (standard input)
    force_exclude: bool = False  # files named explicitly are excluded too (ruff's --force-exclude)
    fix_policy: FixPolicy = FixPolicy()  # the file's config's fixable/unfixable/extend-*-fixes


@dataclass
class FileOutcome:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    fixed_codes: List[Tuple[str, str]] = field(default_factory=list)  # (code, name) of each fix applied
    diff: str = ""
    text: Optional[str] = None  # the fixed text (written unless Options.write is False)
    cacheable: bool = True  # False after an internal error: the next run tries again


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    fixed_by_file: Dict[str, List[Tuple[str, str]]] = field(default_factory=dict)  # --show-fixes
    diffs: List[str] = field(default_factory=list)
    found: int = 0  # files the paths gave (0: nothing was linted, which is no clean result)
    files: int = 0
    unsafe_fixes: bool = False  # unsafe fixes were on for every file (the report calls them fixable)
    # the text a path's findings refer to where it is not the file on disk (standard input)
    sources: Dict[str, SourceFile] = field(default_factory=dict)
