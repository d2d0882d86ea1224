"""Machine-readable output: a JSON list of findings (the schema is documented in the README).

A file that could not be linted (or only in part) is an item too, as ruff gives a syntax error:
`code` and `name` null, the error in `message`, its position where the error names one (else
`location` and `end_location` are null), `fix` null.
"""

from __future__ import annotations

import json

from torchnumlint.findings import fixable
from torchnumlint.report.problems import problems
from torchnumlint.results import Options, RunResult


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    items = []
    for f in result.findings:
        fix = None
        if f.fix is not None:
            fix = {
                "applicability": f.fix.safety.value,
                "applies_with": "--fix" if fixable(f, False) else "--unsafe-fixes",
                "edits": [
                    {
                        "content": e.content,
                        "location": {"row": e.location[0], "column": e.location[1]},
                        "end_location": {"row": e.end_location[0], "column": e.end_location[1]},
                    }
                    for e in f.fix.edits
                ],
            }
        items.append(
            {
                "code": f.code,
                "name": f.name,
                "message": f.message,
                "filename": f.path,
                "cell": f.cell,
                "location": {"row": f.line, "column": f.col},
                "end_location": {"row": f.end_line, "column": f.end_col},
                "fix": fix,
            }
        )
    for p in problems(result):
        where = None if p.line is None else {"row": p.line, "column": p.col or 1}
        items.append(
            {"code": None, "name": None, "message": p.message, "filename": p.path, "location": where, "end_location": where, "fix": None}
        )
    return json.dumps(items, indent=2)
