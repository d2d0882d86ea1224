"""Colour for the human formats (text, concise), as ruff colours them: the path bold, the code
red, `[*]` cyan, the summary bold. Added to the finished report line by line, so the reporters
stay plain and every other format (and a report written to a file) never carries escapes.

When: `--color always|never`, or `auto` (the default): only when standard output is a terminal
and `NO_COLOR` is not set to a non-empty value (no-color.org); `FORCE_COLOR` set non-empty turns
it on under `auto` as well.
"""

from __future__ import annotations

import os
import re
from typing import Mapping, TextIO

_HEADLINE = re.compile(r"^(?P<path>.+?)(?P<where>:(?:cell \d+:)?\d+:\d+:) (?P<code>TNL\d+)(?P<rest> .*?)(?P<mark> \[\*\])?$")
_SUMMARY = re.compile(r"^(Found \d+ findings?|Fixed \d+ findings?|All checks passed\.)")
_BOLD, _RED, _CYAN, _RESET = "\x1b[1m", "\x1b[1;31m", "\x1b[36m", "\x1b[0m"


def wanted(choice: str, stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to colour what goes to `stream` under `--color choice`."""
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    return bool(environ.get("FORCE_COLOR")) or stream.isatty()


def paint(report: str) -> str:
    """`report` (text or concise output) with its headlines and summary coloured."""
    lines = []
    for line in report.split("\n"):
        match = _HEADLINE.match(line)
        if match:
            mark = f"{_CYAN}{match['mark']}{_RESET}" if match["mark"] else ""
            line = f"{_BOLD}{match['path']}{_RESET}{match['where']} {_RED}{match['code']}{_RESET}{match['rest']}{mark}"
        elif _SUMMARY.match(line):
            line = f"{_BOLD}{line}{_RESET}"
        lines.append(line)
    return "\n".join(lines)
