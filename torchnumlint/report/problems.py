"""The run's errors as data for the machine formats.

A run's errors are one-line strings, the form stderr shows (`path: cannot parse: line 3, column 7:
invalid syntax`, `path: line 12: statement nested too deeply ...; skipped`, `path: cannot decode
...`, `path: no such file or directory`). Every machine format must carry them too (a file that
was not linted is not a clean file), with the position where the message names one; this module
is the one place that reads them back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

from torchnumlint.results import RunResult

# `path: why`: the path is everything before the first ": " (a Windows drive letter has no space
# after its colon); a parse error or a skipped statement names its position first.
_ERROR = re.compile(r"^(?P<path>.+?): (?P<message>.*)$", re.S)
_POSITION = re.compile(r"^(?:cannot parse: )?line (?P<line>\d+)(?:, column (?P<col>\d+))?: ")


@dataclass(frozen=True)
class Problem:
    """A file that could not be linted (or only in part): `line`/`col` are 1-based, None where
    the message names no position."""

    path: str
    message: str
    line: Optional[int] = None
    col: Optional[int] = None


def problem(error: str) -> Problem:
    match = _ERROR.match(error)
    if match is None:
        return Problem(path="", message=error)
    message = match.group("message")
    position = _POSITION.match(message)
    if position is None:
        return Problem(path=match.group("path"), message=message)
    col = position.group("col")
    return Problem(match.group("path"), message, int(position.group("line")), int(col) if col else None)


def problems(result: RunResult) -> List[Problem]:
    return [problem(error) for error in result.errors]
