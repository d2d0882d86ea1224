"""GitLab Code Quality report (a JSON list; `artifacts: reports: codequality:` in .gitlab-ci.yml).

GitLab shows each issue on the merge request and matches issues across pipelines by
`fingerprint`, so the fingerprint leaves out line numbers (code added above a finding must not
make it "new"): it hashes the path, the code and the message, plus the finding's rank among
findings with the same three. Paths are relative to the project (`CI_PROJECT_DIR`, else the
working folder), as GitLab resolves them; what UTF-8 cannot carry in a name is replaced
(`carry.py`), its fingerprint still told apart by the name's bytes. A file that could not be linted is a `critical` issue.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from typing import Optional

from torchnumlint.report import carry
from torchnumlint.report.problems import problems
from torchnumlint.results import Options, RunResult


def _relative(path: str) -> str:
    root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    absolute = os.path.abspath(path)
    if os.path.commonpath([absolute, os.path.abspath(root)]) == os.path.abspath(root):
        return os.path.relpath(absolute, root).replace(os.sep, "/")
    return path.replace(os.sep, "/")


def _issue(check: str, message: str, path: str, begin: Optional[dict], end: Optional[dict], severity: str, seen: Counter) -> dict:
    key = (path, check, message)
    seen[key] += 1
    fingerprint = hashlib.sha256(carry.name_bytes("\0".join((*key, str(seen[key]))))).hexdigest()
    location: dict = {"path": path}
    if begin is None:
        location["lines"] = {"begin": 1}
    else:
        location["positions"] = {"begin": begin, "end": end}
    return {"description": message, "check_name": check, "fingerprint": fingerprint, "severity": severity, "location": location}


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    seen: Counter = Counter()
    issues = []
    for f in result.findings:
        issues.append(
            _issue(
                f.code,
                f"{f.code} " + (f"cell {f.cell}: " if f.cell is not None else "") + f.message,
                _relative(f.path),
                {"line": f.line, "column": f.col},
                {"line": f.end_line, "column": f.end_col},
                "major",
                seen,
            )
        )
    for p in problems(result):
        begin = None if p.line is None else {"line": p.line, "column": p.col or 1}
        issues.append(_issue("torchnumlint-error", p.message, _relative(p.path), begin, begin, "critical", seen))
    return json.dumps(carry.plain(issues), indent=2)
