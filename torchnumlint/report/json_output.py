"""Machine-readable output: a JSON list of findings (the schema is documented in the README)."""

from __future__ import annotations

import json

from torchnumlint.findings import fixable
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
                "location": {"row": f.line, "column": f.col},
                "end_location": {"row": f.end_line, "column": f.end_col},
                "fix": fix,
            }
        )
    return json.dumps(items, indent=2)
