"""A buffer linted again after an edit: only the statements the edit can reach, the last findings
of the others carried over (`relint_scope.py` says which, and moves them).

Why: in a large file nearly all of a change's time went to parsing and walking statements the
edit could not change (a 60 KB diffusers script: ~0.9 s of CPU per change). A statement's
findings also depend on the project facts its rules asked about, and an edit of the buffer changes
its own facts (a call typed, a helper added): so every lint records the questions its rules asked
of the index with their answers (`fact_reads.RecordingIndex`, as the result cache does), and the
last findings are carried over only while the new index answers every one of them as before
(`fact_reads.Replay`; no replay when the index is the very same object). An edit that moves lines
moves the positions those answers hold (a class's line, a function's key), so no replay agrees;
there the other files' facts must be the very same, and the buffer's own facts differ from the
last in positions at most (`moves.moves`: the class kinds, fp16 reach and call graph are the
last ones, moved) and in the calls (`facts.same_names`: what its helpers produce is as it was). A
call added or removed can change only the answers about the functions it may call, and those are
named in the edited statement's text, so `relint_scope` lints them again. Before the replay, the
last questions about which words of the buffer name a producer are narrowed to the words of the
statements carried over (`kept_words.py`), and the buffer's own summary is not compared, only
the answers asked of it (`_own_as_now`): a helper added, renamed or removed changes both, and
made every replay fail. What a narrowed lint
asked is added to what the carried findings' lints asked; a lint that read the index whole
(`Recorder.reads()` is None) is carried over only with the same index.

Anything this cannot prove (no last lint of the path, other rules or strictness, no project index,
an edit outside a function or class) lints the whole buffer, as before.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Type

from torchnumlint.cache import canonical_digest
from torchnumlint.fact_reads import BASE, Replay, recording
from torchnumlint.findings import Finding
from torchnumlint.index import ProjectIndex
from torchnumlint.moves import moves
from torchnumlint.server.kept_words import narrowed
from torchnumlint.server.facts import same_names
from torchnumlint.source import SourceError, read_source
from torchnumlint.summaries import Summaries, words

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.relint_scope import Snapshot
    from torchnumlint.rules.base import Rule
# `engine` and `relint_scope` (libcst) are imported where a lint runs: the server's editor process
# imports the lint process's modules to start it, and never libcst

Answers = Dict[tuple, str]  # the questions a buffer's findings asked of the facts -> their answers' digests


class _Last(NamedTuple):
    settings: tuple  # the rules and strictness
    facts: ProjectIndex  # the index it was linted with
    snapshot: "Snapshot"
    findings: List[Finding]
    answers: Optional[Answers]  # None: the index was read whole
    basis: Optional[Tuple[ProjectIndex, ProjectIndex]]  # the other files' facts and the buffer's (`ProjectFacts.basis`)


class Relinter:
    """The last lint of each of the most recent `kept` buffers, and the narrowed lints after them."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._last: "OrderedDict[str, _Last]" = OrderedDict()
        self.narrowed = 0  # lints narrowed
        self.carried = 0  # findings the last narrowed lint carried over

    def lint(
        self,
        path: str,
        snapshot: "Snapshot",
        rules: Sequence[Type["Rule"]],
        index: Optional[ProjectIndex],
        basis: Optional[Tuple[ProjectIndex, ProjectIndex]],
        strict: bool,
        time_limit: float,
    ) -> List[Finding]:
        """The findings of `rules` in the buffer `snapshot` at `path` (as `engine.lint_text` gives them)."""
        from torchnumlint import engine

        if index is None:  # no project facts yet: lint_text makes the buffer's own; nothing is kept
            self._last.pop(path, None)
            return engine.lint_text(path, snapshot.text, rules, None, strict=strict, time_limit=time_limit)
        settings = (tuple(rules), strict)
        last = self._last.get(path)
        found = None
        if last is not None and last.settings == settings:
            found = self._narrowed(path, last, snapshot, rules, index, basis, strict, time_limit)
        if found is None:
            recorded = recording(index)()
            findings = engine.lint_text(path, snapshot.text, rules, recorded, strict=strict, time_limit=time_limit)
            found = findings, _answers(recorded.recorder.reads())
        self._last[path] = _Last(settings, index, snapshot, found[0], found[1], basis)
        self._last.move_to_end(path)
        while len(self._last) > self.kept:
            self._last.popitem(last=False)
        return found[0]

    def _narrowed(self, path, last: _Last, snapshot: "Snapshot", rules, index: ProjectIndex, basis, strict: bool, time_limit: float):
        """(findings, answers) from the statements the edit reaches and the last findings of the
        rest; None where that cannot be proved."""
        from torchnumlint import engine
        from torchnumlint.relint_scope import plan

        scope = plan(last.snapshot, snapshot, last.findings)
        if scope is None:
            return None
        if last.answers is not None:  # only the carried statements' words matter (`kept_words.py`)
            last = last._replace(answers=narrowed(last.answers, words(scope.carried_text()), _frames(last, path)))
        if not _still_answered(last, index, basis, path, snapshot.text):
            return None
        carried = scope.carried(last.findings)
        if carried is None:
            return None
        self.narrowed += 1
        self.carried = len(carried)
        if scope.masked is None:
            return carried, last.answers
        recorded = recording(index)()
        findings = engine.lint_text(path, snapshot.text, rules, recorded, strict=strict, time_limit=time_limit, masked=scope.masked)
        asked = _answers(recorded.recorder.reads())
        answers = None if asked is None or last.answers is None else {**last.answers, **asked}
        return scope.fresh(findings) + carried, answers


def _frames(last: _Last, path: str) -> Callable[[str], Summaries]:
    """The summaries each frame of the last lint's questions was (`fact_reads.BASE`: the index's;
    the buffer's path: its last text's summary over them)."""

    def frame(name: str) -> Summaries:
        if name == BASE:
            return last.facts.summaries
        if name != path:
            raise ValueError(name)  # a lint asks its own file's frame only
        return last.facts.summaries.with_file(path, Replay(last.facts, lambda _: last.snapshot.text).own_summary(path))

    return frame


def _answers(reads) -> Optional[Answers]:
    return None if reads is None else dict(reads)


def _still_answered(last: _Last, index: ProjectIndex, basis, path: str, text: str) -> bool:
    """Whether `index` answers every question the last findings asked as the last index did, up
    to the positions in the buffer an edit moved (see the module)."""
    if index is last.facts:
        return True
    if basis is not None and last.basis is not None and basis[0] is last.basis[0]:
        before, after = last.basis[1], basis[1]
        if moves(path, before, after) is not None and same_names(before, after, path):
            return True
    if last.answers is None:
        return False

    def text_of(other: str) -> Optional[str]:
        if other == path:
            return text
        try:
            return read_source(other).text
        except SourceError:
            return None

    replay = Replay(index, text_of)
    return replay.still_valid(_own_as_now(last.answers, path, replay))


def _own_as_now(answers: Answers, path: str, replay: Replay) -> List[Tuple[tuple, str]]:
    """The last answers with the buffer's own summary (`("own", path)`: the frame its producer
    questions were asked of) as the new text makes it.

    Why: that summary changes with any function of the buffer added or changed, so the replay
    failed after every helper added and the whole buffer was linted. What the carried findings
    read of that frame is recorded question by question, and each is replayed in the frame the
    new summary makes (whatever else is read of a frame is recorded whole: `fact_reads.py`), so
    the summary need not be the same, only those answers."""
    own = ("own", path)
    if own not in answers:
        return list(answers.items())
    try:
        now = canonical_digest(replay.own_summary(path))
    except ValueError:  # the buffer's text could not be read: compare the answer as it was
        return list(answers.items())
    return [(question, now if question == own else answer) for question, answer in answers.items()]
