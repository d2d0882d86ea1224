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


@dataclass
class FileOutcome:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""
    text: Optional[str] = None  # the fixed text, once written


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    diffs: List[str] = field(default_factory=list)
    files: int = 0
    unsafe_fixes: bool = False  # unsafe fixes were on for every file (the report calls them fixable)
