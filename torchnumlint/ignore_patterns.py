"""Exclude and .gitignore patterns, matched with one regular expression before pathspec's loop.

Why: pathspec matches a path by searching every pattern in turn (and a walk asks twice per file:
its path from the config's folder and its name): on a warm run over 1,086 files, 21 default
excludes made 52,000 searches, a third of the walk. Nearly every path matches no pattern, and one
expression made of its including patterns (`union`) says so in one search: a path no including
pattern matches is not matched, whatever the negations (`!keep`) say. A path it matches is asked
of the spec itself, which alone decides negations and directory patterns (`build/`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, Optional, Set

if TYPE_CHECKING:  # pragma: no cover
    import pathspec

# pathspec names a group in each pattern (`(?P<ps_d>/)`: "matched as a folder"); in one expression
# the names would repeat, which `re` refuses, and a plain group matches the same.
_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")


class Patterns:
    """`spec` (a `pathspec.GitIgnoreSpec`), with the same `match_file` answers."""

    def __init__(self, spec: pathspec.PathSpec) -> None:
        from pathspec.util import normalize_file

        self.spec = spec
        self._any = union(spec)
        self._normalized = normalize_file  # the path as the spec's patterns see it

    def match_file(self, path: str) -> bool:
        if self._any is not None and self._any.search(self._normalized(path)) is None:
            return False  # no including pattern matches it: the spec would say the same
        return bool(self.spec.match_file(path))


def union(spec: pathspec.PathSpec) -> Optional[re.Pattern[str]]:
    """One expression that matches a path wherever any of `spec`'s including patterns does
    (negated ones only take a match back, and a no-op, a comment or a blank line, matches
    nothing); None when it cannot be built exactly:
    a pattern that is not a regular expression of text, one that refers back to a group by name,
    patterns compiled with different flags."""
    parts: List[str] = []
    flags: Set[int] = set()
    for pattern in spec.patterns:
        if not pattern.include:
            continue
        regex = getattr(pattern, "regex", None)
        if not isinstance(regex, re.Pattern) or not isinstance(regex.pattern, str) or "(?P=" in regex.pattern:
            return None
        parts.append(_NAMED_GROUP.sub("(?:", regex.pattern))
        flags.add(regex.flags)
    if len(flags) > 1:
        return None
    try:
        return re.compile("|".join(f"(?:{part})" for part in parts) or "(?!)", flags.pop() if flags else 0)
    except re.error:
        return None
