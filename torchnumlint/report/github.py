"""GitHub Actions workflow commands: one `::error` annotation per finding, shown on the pull
request's diff at the finding's span, and one per file that could not be linted.

Property values and messages are escaped as the runner's parser expects (`%`, CR, LF everywhere;
`:` and `,` in properties too), so a message with a colon or a path with a comma survives; the runner reads UTF-8, so what a
name holds that UTF-8 cannot carry is replaced (`carry.py`).
"""

from __future__ import annotations

from typing import List

from torchnumlint.findings import fixable
from torchnumlint.report import carry
from torchnumlint.report.problems import problems
from torchnumlint.results import Options, RunResult


def _data(text: str) -> str:
    return carry.text(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _command(properties: dict, message: str) -> str:
    fields = ",".join(f"{key}={_property(str(value))}" for key, value in properties.items())
    return f"::error {fields}::{_data(message)}"


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    lines: List[str] = []
    for f in result.findings:
        mark = " [*]" if fixable(f, bool(options.unsafe_fixes)) else ""
        where = {
            "title": f"torchnumlint ({f.code})",
            "file": f.path,
            "line": f.line,
            "col": f.col,
            "endLine": f.end_line,
            "endColumn": f.end_col,
        }
        lines.append(_command(where, f"{f.path}:{f.where}: {f.code} {f.message}{mark}"))
    for p in problems(result):
        where = {"title": "torchnumlint: file not linted", "file": p.path}
        if p.line is not None:
            where.update(line=p.line, col=p.col or 1)
        lines.append(_command(where, f"{p.path}: {p.message}"))
    return "\n".join(lines)
