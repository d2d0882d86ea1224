"""What one file's lint read of the project facts, so that its cached result outlives edits elsewhere.

Why: a cached result that read the project index was valid only under the whole project's
fingerprint, so adding a helper anywhere re-linted every file that reads the index (5.5 s of a
6.5 s cold run on x-transformers). Instead the runner hands the rules a `RecordingIndex`: each
question a rule asks of the facts (the class or function a name resolves to, the fp16 region
reaching a function, whether the project scales its loss, the kind a callee produces, the callers
of a function with the facts of the files they are in, which words of a text name a producer) is
kept with the digest of its answer (`Recorder.reads`). A later run whose fingerprint differs asks
the same questions of its own index (`Replay.still_valid`) and reuses the result when every answer
is the same, as incremental type checkers do: an edit re-lints the files whose questions it
answers differently.

A question is plain data (strings, numbers, None, tuples of them) and `_ask` answers it for both
the recording and the replay, so what is replayed is exactly what was asked. Whatever a rule reads
that is not wrapped here (another attribute of the index or of its summaries) marks the read as
`whole`: that result stays valid only under the whole fingerprint, as before. `mentions_producer`
depends on every word of the text it is given (a helper added under one of them makes it True):
the words of every text it was given in a file are kept once, as CRC-32s (one hex string), and the
replay judges every producer name whose CRC is among them, so a collision can only cost a re-lint.
"""

from __future__ import annotations

import ast
import zlib
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

from torchnumlint.cache import canonical_digest
from torchnumlint.index import ClassInfo, FuncInfo, ProjectIndex, Site
from torchnumlint.summaries import CallerSite, FileSummary, Kind, Instance, Summaries, summarize, words

Reads = List[Tuple[tuple, str]]  # what a lint entry stores: each question and its answer's digest
BASE = ""  # the frame of the index's own summaries; a path is `with_file(path, its own summary)`


def _ask(index: ProjectIndex, frames: Dict[str, Summaries], question: tuple) -> object:
    """The answer of the index (and of the summaries `frames` name) to `question`."""
    what = question[0]
    if what == "lookup":
        return index.lookup(question[1], question[2], question[3])
    if what == "function":
        return index.function(question[1], question[2], question[3])
    if what == "fp16_sites":
        return index.fp16_sites()
    if what == "has_scaler":
        return index.has_scaler()
    if what == "reached":
        return index.reached.get(question[1])
    if what == "any_reached":
        return bool(index.reached)
    summaries = frames[question[1]]
    if what == "callee_kind":
        return summaries.callee_kind(question[2], question[3], question[4], question[5], question[6])
    if what == "callers":  # a caller's file is read for its call: its facts hold the call's text
        return [(site, summaries.files.get(site.path)) for site in summaries.callers(question[2], question[3], question[4])]
    if what == "buffer":
        return summaries.buffers.get(question[2])
    if what == "may_be_passed":
        return summaries.may_be_passed(question[2], frozenset(question[3]))
    if what == "instance_class":
        return summaries.instance_class(question[2], question[3], question[4])
    if what == "callee_no_grad":
        return summaries.callee_no_grad(question[2], question[3], question[4], question[5])
    raise ValueError(f"not a question of the project facts: {what!r}")


# The questions asked of the index itself, not of a frame of its summaries.
_OF_INDEX = frozenset({"lookup", "function", "fp16_sites", "has_scaler", "reached", "any_reached"})


def _crc(word: str) -> int:
    return zlib.crc32(word.encode("utf-8", "surrogatepass"))


def crc_hex(word: str) -> str:
    """A word as a producer question keeps it (`Recorder.reads`): its CRC-32, 8 hex digits."""
    return f"{_crc(word):08x}"


class _Digests:
    """Answers' digests; a class's is kept by identity (its forward facts are the bulk of a
    digest, and the index's classes live as long as the index)."""

    def __init__(self) -> None:
        self._classes: Dict[int, Tuple[ClassInfo, str]] = {}

    def of(self, answer: object) -> str:
        if isinstance(answer, ClassInfo):
            known = self._classes.get(id(answer))
            if known is None or known[0] is not answer:
                known = self._classes[id(answer)] = (answer, canonical_digest(answer))
            return known[1]
        return canonical_digest(answer)


class Recorder:
    """The questions one file's lint asked of `index`, with their answers' digests."""

    def __init__(self, index: ProjectIndex, digests: _Digests) -> None:
        self.index = index
        self.digests = digests
        self.frames: Dict[str, Summaries] = {BASE: index.summaries}
        self.answers: Dict[tuple, str] = {}
        self.words: Dict[str, Set[str]] = {}  # frame -> the words `mentions_producer` was asked about
        self.kinds: Dict[str, Set[Tuple[str, ...]]] = {}  # frame -> the kinds it was asked about
        self.whole = False  # something not wrapped was read: valid only under the whole fingerprint

    def ask(self, question: tuple) -> object:
        answer = _ask(self.index, self.frames, question)
        if question not in self.answers and not self.whole:
            try:
                self.answers[question] = self.digests.of(answer)
            except TypeError:  # an answer the cache cannot digest: keep the whole fingerprint
                self.whole = True
        return answer

    def own(self, path: str, summary: Optional[FileSummary], frame: Summaries) -> None:
        """`with_file(path, summary)` was asked: the frame its questions are asked of."""
        question = ("own", path)
        check = canonical_digest(summary)
        if self.answers.setdefault(question, check) != check:
            self.whole = True  # two own summaries of one file: not one frame
        self.frames[path] = frame

    def reads(self) -> Optional[Reads]:
        """What the entry stores; None when something was read whole."""
        if self.whole:
            return None
        found = list(self.answers.items())
        for frame, asked in self.words.items():
            kinds = tuple(sorted(self.kinds[frame]))
            producers = tuple(tuple(sorted(self.frames[frame].producers_among(asked, frozenset(one)))) for one in kinds)
            crcs = "".join(sorted({crc_hex(word) for word in asked}))
            found.append((("producers", frame, kinds, crcs), canonical_digest(producers)))
        return found


class _RecordingSummaries(Summaries):
    """A `Summaries` whose questions are recorded (its own state is never set up: whatever else
    is read of it goes through `__getattr__` and is recorded whole)."""

    def __init__(self, summaries: Summaries, frame: str, recorder: Recorder) -> None:  # no super().__init__(): see the class
        self._summaries = summaries
        self._frame = frame
        self._recorder = recorder

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name in ("_summaries", "_frame", "_recorder"):
            raise AttributeError(name)
        self._recorder.whole = True
        return getattr(self._summaries, name)

    @property
    def buffers(self) -> "_Buffers":  # type: ignore[override]
        return _Buffers(self._recorder, self._frame)

    def callee_kind(
        self, path: str, instance: Optional[Instance], callee: Optional[tuple], depth: int = 0, element: Optional[int] = None
    ) -> Optional[Kind]:
        return self._recorder.ask(("callee_kind", self._frame, path, instance, callee, depth, element))  # type: ignore[return-value]

    def callers(self, path: str, cls: Optional[str], name: str) -> List[CallerSite]:
        found = self._recorder.ask(("callers", self._frame, path, cls, name))
        return [site for site, _ in found]  # type: ignore[attr-defined]

    def instance_class(self, path: str, instance: Optional[Instance], callee: Optional[tuple]) -> Optional[Instance]:
        return self._recorder.ask(("instance_class", self._frame, path, instance, callee))  # type: ignore[return-value]

    def callee_no_grad(self, path: str, instance: Optional[Instance], callee: Optional[tuple], depth: int = 0) -> bool:
        return self._recorder.ask(("callee_no_grad", self._frame, path, instance, callee, depth))  # type: ignore[return-value]

    def may_be_passed(self, name: str, kinds: FrozenSet[str]) -> bool:
        return self._recorder.ask(("may_be_passed", self._frame, name, tuple(sorted(kinds))))  # type: ignore[return-value]

    def mentions_producer(self, text: str, kinds: FrozenSet[str]) -> bool:
        self._recorder.words.setdefault(self._frame, set()).update(words(text))
        self._recorder.kinds.setdefault(self._frame, set()).add(tuple(sorted(kinds)))
        return self._summaries.mentions_producer(text, kinds)

    def with_file(self, path: str, summary: Optional[FileSummary]) -> Summaries:
        if self._frame != BASE:
            self._recorder.whole = True
            return self._summaries.with_file(path, summary)
        frame = self._summaries.with_file(path, summary)
        self._recorder.own(path, summary, frame)
        return _RecordingSummaries(frame, path, self._recorder)


class _Buffers:
    """`Summaries.buffers` (the texts an editor holds), read one path at a time."""

    def __init__(self, recorder: Recorder, frame: str) -> None:
        self._recorder = recorder
        self._frame = frame

    def get(self, path: str, default: Optional[str] = None) -> Optional[str]:
        found = self._recorder.ask(("buffer", self._frame, path))
        return default if found is None else found  # type: ignore[return-value]

    def __contains__(self, path: object) -> bool:
        return self._recorder.ask(("buffer", self._frame, path)) is not None

    def __getattr__(self, name: str) -> object:  # items(), keys(): every buffer
        if name.startswith("__") or name in ("_recorder", "_frame"):
            raise AttributeError(name)
        self._recorder.whole = True
        return getattr(self._recorder.frames[self._frame].buffers, name)


class _Reached:
    """`ProjectIndex.reached` (function key -> the first fp16 region reaching it), read one key at a time."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def get(self, key: str, default: Optional[Site] = None) -> Optional[Site]:
        found = self._recorder.ask(("reached", key))
        return default if found is None else found  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        return self._recorder.ask(("reached", key)) is not None

    def __getitem__(self, key: str) -> Site:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __bool__(self) -> bool:
        return bool(self._recorder.ask(("any_reached",)))

    def __getattr__(self, name: str) -> object:  # keys(), items(), len(): the whole map
        if name.startswith("__") or name == "_recorder":
            raise AttributeError(name)
        self._recorder.whole = True
        return getattr(self._recorder.index.reached, name)


class RecordingIndex(ProjectIndex):
    """The project index as one file's rules see it: every question recorded (`recorder`). Its
    dataclass fields are never set: reading one goes through `__getattr__` and is recorded whole."""

    def __init__(self, index: ProjectIndex, digests: _Digests) -> None:  # the dataclass init is not called: see the class
        self.recorder = Recorder(index, digests)
        self.summaries = _RecordingSummaries(index.summaries, BASE, self.recorder)
        self.reached = _Reached(self.recorder)  # type: ignore[assignment]

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name == "recorder":
            raise AttributeError(name)
        self.recorder.whole = True
        return getattr(self.recorder.index, name)

    def lookup(self, name: str, qual: Optional[str], from_path: str) -> Optional[ClassInfo]:
        return self.recorder.ask(("lookup", name, qual, from_path))  # type: ignore[return-value]

    def function(self, name: str, qual: Optional[str], from_path: str) -> Optional[FuncInfo]:
        return self.recorder.ask(("function", name, qual, from_path))  # type: ignore[return-value]

    def fp16_sites(self) -> List[Site]:
        return self.recorder.ask(("fp16_sites",))  # type: ignore[return-value]

    def has_scaler(self) -> bool:
        return bool(self.recorder.ask(("has_scaler",)))

    def reached_by(self, info: ClassInfo, method: str = "forward") -> Optional[Site]:
        key = info.methods.get(method)
        return self.reached.get(key) if key is not None else None


def recording(index: ProjectIndex) -> Callable[[], RecordingIndex]:
    """A maker of recording views of `index` (one per file linted), sharing the digests."""
    digests = _Digests()
    return lambda: RecordingIndex(index, digests)


class Replay:
    """The questions of cached results asked again of a project's (new) index."""

    def __init__(self, index: ProjectIndex, text_of: Callable[[str], Optional[str]]) -> None:
        self.index = index
        self.text_of = text_of  # a file's text, None when it cannot be read
        self.digests = _Digests()
        self._by_crc: Optional[Dict[int, List[str]]] = None  # the base frame's producer names by CRC
        # Answers of the base frame, whose index is the same for every file replayed: most files
        # ask the same questions (a class looked up, a helper's kind, its callers), and answering
        # each once per file cost more than the lints saved. (The producers among a file's words
        # are memoised by the summaries themselves, per name and kinds.)
        self._base_answers: Dict[tuple, str] = {}

    def still_valid(self, reads: Reads) -> bool:
        """Whether every question of `reads` has the answer it had."""
        frames: Dict[str, Summaries] = {BASE: self.index.summaries}
        for question, answer in reads:
            try:
                if question[0] == "own":
                    summary = self.own_summary(question[1])
                    if canonical_digest(summary) != answer:
                        return False
                    frames[question[1]] = self.index.summaries.with_file(question[1], summary)
                    continue
                if question[0] == "producers":
                    names = self._named(frames[question[1]], question[1], question[3])
                    found = tuple(tuple(sorted(frames[question[1]].producers_among(names, frozenset(one)))) for one in question[2])
                    got = canonical_digest(found)
                elif question[0] in _OF_INDEX or question[1] == BASE:
                    got = self._base_answers.get(question) or self._base_answers.setdefault(
                        question, self.digests.of(_ask(self.index, frames, question))
                    )
                else:
                    got = self.digests.of(_ask(self.index, frames, question))
            except (KeyError, IndexError, TypeError, ValueError):
                return False  # a question this version does not ask: not the same answers
            if got != answer:
                return False
        return True

    def own_summary(self, path: str) -> Optional[FileSummary]:
        """A file's own summary as the producer rules put it over the project's
        (`rules/producers.py`: without its calls; None when it does not parse)."""
        text = self.text_of(path)
        if text is None:
            raise ValueError(path)
        try:
            return summarize(path, ast.parse(text), calls=False)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None

    def _named(self, summaries: Summaries, frame: str, crcs: str) -> List[str]:
        """The producer names whose CRC is among `crcs` (a superset of the words once asked about)."""
        wanted = {int(crcs[at : at + 8], 16) for at in range(0, len(crcs), 8)}
        if frame == BASE:
            if self._by_crc is None:
                self._by_crc = {}
                for name in summaries.producer_names():
                    self._by_crc.setdefault(_crc(name), []).append(name)
            return [name for crc in wanted for name in self._by_crc.get(crc, ())]
        return [name for name in summaries.producer_names() if _crc(name) in wanted]
