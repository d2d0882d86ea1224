"""The project's call sites by callee name for a buffer's index, the other files' part kept.

Why: a rule that asks who calls a function of the buffer (`Summaries.callers`, e.g. a divisor
that is a parameter, followed to its callers) makes the summaries index every call of the project
by the name it may call (`Summaries._named_calls`). Each change gives the buffer a fresh
`Summaries`, and indexing diffusers' calls again took ~170 ms of CPU per change on a 60 KB file
(most of what the caller lookups cost). A call's names depend on its own file's summary only
(`summaries.call_names`), so the other files' part is indexed once while their facts stand
(`facts.ProjectFacts`) and the buffer's calls are added to it at each change.

`Summaries.callers` sorts what it finds, so the order in which sites are listed changes nothing.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from torchnumlint.summaries import CallFact, FileSummary, named_calls

Sites = List[Tuple[str, CallFact]]


class OtherCalls:
    """The call sites of every file of the project but the buffer's, indexed on first use."""

    def __init__(self, files: Mapping[str, Optional[FileSummary]]) -> None:
        self._files = files
        self._table: Optional[Dict[str, Sites]] = None

    def table(self) -> Dict[str, Sites]:
        if self._table is None:
            self._table = named_calls(self._files)
        return self._table


class BufferCalls(Mapping[str, Sites]):
    """`Summaries._named_calls()` of an index made for a buffer: the other files' sites (kept)
    and the buffer's own (indexed here, a file's worth)."""

    def __init__(self, others: OtherCalls, path: str, summary: Optional[FileSummary]) -> None:
        self._others = others
        self._own = named_calls({path: summary})

    def __getitem__(self, name: str) -> Sites:
        found = self._others.table().get(name, []) + self._own.get(name, [])
        if not found:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._others.table().keys() | self._own.keys())

    def __len__(self) -> int:
        return len(self._others.table().keys() | self._own.keys())
