"""What a run is asked to do and what it produces: plain data, so that the reporters read it
without importing the engine (or libcst).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from torchnumlint.findings import Finding


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


@dataclass
class FileOutcome:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""
    text: Optional[str] = None  # the fixed text, once written
    cacheable: bool = True  # False after an internal error: the next run tries again


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    diffs: List[str] = field(default_factory=list)
    files: int = 0
    unsafe_fixes: bool = False  # unsafe fixes were on for every file (the report calls them fixable)
