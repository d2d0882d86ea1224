"""The finalized project facts stored once, so that a one-file run decodes only what its lint asks.

Why: a pre-commit run lints one file, yet building the project index decoded every file's facts
from the pack (diffusers: 2,089 rows, 0.7 s of CPU measured in one process, most of a 2 s run) to answer
a handful of questions. What a lint asks of the index (`fact_reads.py` lists it: the class or
function a name means, the fp16 region reaching a function, the project's fp16 sites and scaler,
and the summaries' questions) needs, besides a few files' facts, only what `ProjectIndex.finalize`
derives from all of them and a few name tables. `Tables` holds exactly that: the finalized
results (each class's kind, what the fp16 regions reach, the sites), and, per name, the files
whose facts can answer a question about it (classes, aliases, module-level functions; for the
summaries, the calls by callee name), the files whose calls resolve to each project function or
method (`Tables.called`: a one-file run decodes only those, not every file that calls some
`forward`), and the summaries' answers that read every file (what each producer name gives, each
class's resolved subclasses). `LazyIndex` answers from the
tables, decoding a file's facts on first need.

Tables are stored per project and path form in the pack (kind `tables`), with the facts key of
each file they were made from. A run whose files' facts keys all match uses them as they are;
when some differ (an edit), it compares each changed file's new facts with the old ones
(`graph_part`: everything `finalize` reads, that is all but the summaries and the forwards' own
facts) and so are the summaries' names and results (`names_part`: all but calls, the kinds
calls pass, and no_grad), the finalized results and stored answers still hold and only the counts
of the summaries change (the changed files' entries taken out and put back, `Counts.edit`). When
the graph facts differ only in positions (a line added above a class, a function or a region moves
every key and site below it), the finalized results are mapped to the new positions (`moves.py`).
When they differ in more (a class, a call, a region or an alias added, removed or renamed, a
helper returns another kind), or a file was added or deleted, the runner decodes every file's
facts and finalizes them (`runner._whole_index`), and stores new tables.

Anything else read of a `LazyIndex` (an attribute of the index the tables do not cover) builds
the whole index then (`__getattr__`), as before: slower, never different.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from torchnumlint import plaindata
from torchnumlint.index import ClassInfo, FuncInfo, ProjectIndex, Site, _pick
from torchnumlint.moves import moves
from torchnumlint.summaries import CallFact, FileSummary, Instance, Summaries, call_names, producer_questions

Load = Callable[[List[str]], Dict[str, ProjectIndex]]  # paths -> their facts (finalized kinds not applied)


@dataclass
class Tables:
    """What `finalize` gives and the name tables a one-file lint reads (see the module)."""

    paths: List[str] = field(default_factory=list)  # the files whose facts were merged, in order
    keys: List[str] = field(default_factory=list)  # each one's facts key in the pack
    kinds: List[List[Tuple[str, bool]]] = field(default_factory=list)  # per file: its classes' (kind, protected)
    classes: Dict[str, List[int]] = field(default_factory=dict)  # class name -> files (positions in `paths`)
    aliases: Dict[str, List[int]] = field(default_factory=dict)
    toplevel: Dict[str, List[int]] = field(default_factory=dict)
    reached: Dict[str, Site] = field(default_factory=dict)
    sites: List[Site] = field(default_factory=list)  # `fp16_sites()`
    scaler: bool = False
    summarised: List[int] = field(default_factory=list)  # the files with an entry in the summaries
    counts: "Counts" = field(default_factory=lambda: Counts())
    # The summaries' answers that read every file: the kinds a producer of each name gives
    # (`Summaries._produces`, for the names that give any), and each class's project subclasses
    # (its bases resolved) with the members each of those defines or assigns (`_find_override`).
    produce: Dict[str, List[str]] = field(default_factory=dict)
    children: Dict[Tuple[int, str], List[Tuple[int, str]]] = field(default_factory=dict)
    members: Dict[Tuple[int, str], List[str]] = field(default_factory=dict)
    # Who calls each project function or method: (its file, its class or "", its name) -> the
    # files (positions) with a call `Summaries._call_target` resolves to it. What a call resolves
    # to reads the other files' names only (`names_part`), which tables that still hold share, so
    # the entries stay true for every file whose facts are those the tables were made from; the
    # files changed since (`edited`) are asked by name (`Counts.calls`). A one-file run reads
    # the callers of its functions without decoding every file that calls a `forward`.
    called: Dict[Tuple[int, str, str], List[int]] = field(default_factory=dict)
    edited: List[int] = field(default_factory=list)  # positions whose facts changed since `make`

    if not TYPE_CHECKING:  # (for the type checker, every field is an attribute like any other)

        def __getattr__(self, name: str) -> object:
            """A field that `loads` left undecoded (`_DEFERRED`), decoded on its first read."""
            pending = self.__dict__.get("_pending")
            if pending is None or name not in pending:
                raise AttributeError(name)
            value = plaindata.loads(pending.pop(name), _hints()[name])
            setattr(self, name, value)
            return value


@dataclass
class Counts:
    """The summaries' name tables, as counts of the files that add each entry, so that a file's
    entries can be taken out (an edit, or the frame of a file linted: `Summaries.with_file`)."""

    producers: Dict[str, int] = field(default_factory=dict)  # `producer_questions` names
    passes: Dict[str, Dict[str, int]] = field(default_factory=dict)  # a name called -> kind -> files (`FileSummary.passes`)
    calls: Dict[str, List[int]] = field(default_factory=dict)  # `call_names` -> the files (positions) with such calls

    def edit(self, at: int, path: str, summary: Optional[FileSummary], sign: int) -> "Counts":
        """These counts with the entries of the file at position `at` added (`sign` 1) or taken
        out (-1), as a copy that shares every table it does not change."""
        if summary is None:
            return self
        producers, passes, calls = dict(self.producers), dict(self.passes), dict(self.calls)
        for name in dict.fromkeys(name for name, _ in producer_questions(path, summary)):
            producers[name] = producers.get(name, 0) + sign
            if not producers[name]:
                del producers[name]
        for name, kind in summary.passes:
            kinds = passes[name] = dict(passes.get(name, {}))
            kinds[kind] = kinds.get(kind, 0) + sign
            if not kinds[kind]:
                del kinds[kind]
            if not kinds:
                del passes[name]
        for name in dict.fromkeys(name for fact in summary.calls for name in call_names(summary, fact)):
            files = calls[name] = [one for one in calls.get(name, []) if one != at] + ([at] if sign > 0 else [])
            if not files:
                del calls[name]
        return Counts(producers, passes, calls)


# The fields a one-file run seldom reads, 45 % of the tables' 2.4 MB on diffusers (of six runs
# over diffusers files, each asked what producers give; three read a file's facts, one a class's
# subclasses): stored as sections of their own, each decoded on its first read.
_DEFERRED = frozenset({"kinds", "classes", "toplevel", "children", "members", "called"})
_FIELDS = [one.name for one in dataclasses.fields(Tables)]


@functools.lru_cache(maxsize=None)
def _hints() -> Dict[str, object]:
    return typing.get_type_hints(Tables)


def dumps(tables: Tables) -> bytes:
    """The pack's payload of `tables` (`cache.py` reads it with `loads`): a JSON line of the
    length of each field's section, then each field as `plaindata` writes it, in field order."""
    sections = [plaindata.dumps(getattr(tables, name)) for name in _FIELDS]
    return json.dumps([len(section) for section in sections]).encode("ascii") + b"\n" + b"".join(sections)


def loads(payload: bytes) -> Tables:
    """The tables of a `dumps` payload, its `_DEFERRED` fields decoded when first read
    (`Tables.__getattr__`); `plaindata.Mismatch` when the sections are not those of `Tables`.

    Why decoding on first read is safe: the pack checked the payload's digest as the row was read
    (`cache.py`), and its key holds the linter's code, so a section is what this code wrote; one
    that is not of its field's type (a row forged with its digest) raises `plaindata.Mismatch`
    when read, which is the file's one-line error, never code run."""
    head, _, body = payload.partition(b"\n")
    try:
        lengths = json.loads(head)
    except ValueError:
        raise plaindata.Mismatch("not a tables payload") from None
    if (
        type(lengths) is not list
        or len(lengths) != len(_FIELDS)
        or any(type(n) is not int or n < 0 for n in lengths)
        or sum(lengths) != len(body)
    ):
        raise plaindata.Mismatch("not a tables payload")
    tables = Tables.__new__(Tables)
    pending: Dict[str, bytes] = {}
    start = 0
    for name, length in zip(_FIELDS, lengths):
        section = body[start : start + length]
        start += length
        if name in _DEFERRED:
            pending[name] = section
        else:
            setattr(tables, name, plaindata.loads(section, _hints()[name]))
    tables._pending = pending  # type: ignore[attr-defined]  # read by `Tables.__getattr__`
    return tables


def graph_part(part: ProjectIndex) -> ProjectIndex:
    """What `finalize` reads of a file's facts: all but its summaries and its forwards' facts."""
    classes = {name: [dataclasses.replace(info, forward=None) for info in infos] for name, infos in part.classes.items()}
    return dataclasses.replace(part, classes=classes, summaries=Summaries(), reached={}, subclasses={}, files=0)


def names_part(summary: Optional[FileSummary]) -> Optional[FileSummary]:
    """What the stored answers read of a file's summary (`Tables.produce`, `children`, `members`):
    all but its calls (and their digest), the names its calls pass a kind to, and what runs
    without autograd, which are read file by file when asked."""
    if summary is None:
        return None
    return summary._replace(calls=(), callers_digest="", no_grad=frozenset(), passes=frozenset())


def _classes(part: ProjectIndex) -> Iterator[ClassInfo]:
    return (info for infos in part.classes.values() for info in infos)


def make(paths: Sequence[str], keys: Sequence[str], parts: Mapping[str, ProjectIndex], index: ProjectIndex) -> Tables:
    """The tables of the finalized `index`, merged from `parts` (each file's, in `paths` order)."""
    tables = Tables(list(paths), list(keys), reached=dict(index.reached), sites=index.fp16_sites(), scaler=index.has_scaler())
    for at, path in enumerate(paths):
        part = parts[path]
        tables.kinds.append([(info.kind, info.protected) for info in _classes(part)])
        for table, names in (("classes", part.classes), ("aliases", part.aliases), ("toplevel", part.toplevel)):
            for name in names:
                getattr(tables, table).setdefault(name, []).append(at)
        if path in part.summaries.files:
            tables.summarised.append(at)
            tables.counts = tables.counts.edit(at, path, part.summaries.files[path], +1)
    _answer(tables, index.summaries)
    _resolve_calls(tables, index.summaries)
    return tables


def _answer(tables: Tables, summaries: Summaries) -> None:
    """The answers of `summaries` that read every file (see `Tables.produce`)."""
    at = {path: position for position, path in enumerate(tables.paths)}
    named, _ = summaries._names()
    for name, questions in named.items():
        kinds = sorted(frozenset().union(*(summaries._answers(question) for question in questions)))
        if kinds:
            tables.produce[name] = kinds
    for path, summary in summaries.files.items():
        for cls_name, info in summary.classes.items() if summary is not None else ():
            for base in info.bases:
                found = summaries._resolve(path, base, 0)
                if found is not None and found[0] == "class":
                    children = tables.children.setdefault((at[found[1]], found[2]), [])
                    if (at[path], cls_name) not in children:
                        children.append((at[path], cls_name))
                    tables.members[(at[path], cls_name)] = sorted({*info.methods, *info.attrs})


def _resolve_calls(tables: Tables, summaries: Summaries) -> None:
    """`Tables.called`: every call fact of the project resolved to what it calls."""
    at = {path: position for position, path in enumerate(tables.paths)}
    for path, summary in summaries.files.items():
        for fact in summary.calls if summary is not None else ():
            target = summaries._call_target(path, fact)
            if target is not None:
                files = tables.called.setdefault((at[target[0]], target[1] or "", target[2]), [])
                if not files or files[-1] != at[path]:
                    files.append(at[path])


def updated(tables: Tables, keys: Sequence[str], old: Mapping[str, ProjectIndex], new: Mapping[str, ProjectIndex]) -> Optional[Tables]:
    """`tables` for the same files whose facts keys are now `keys`, the changed files' facts
    being `old` then `new`; None when a change reaches what `finalize` gives (`graph_part`) in
    more than the positions of a file's facts (`moves.py`: those are mapped)."""
    if len(keys) != len(tables.keys):
        return None
    for at, (path, key) in enumerate(zip(tables.paths, keys)):
        if key == tables.keys[at]:
            continue
        before, after = old[path], new[path]
        if (path in before.summaries.files) != (path in after.summaries.files):
            return None
        if names_part(before.summaries.files.get(path)) != names_part(after.summaries.files.get(path)):
            return None
        if graph_part(before) != graph_part(after):
            moved = moves(path, before, after)
            if moved is None:
                return None
            tables.reached = moved.reached(tables.reached)
            tables.sites = [moved.site(site) for site in tables.sites]
        tables.counts = tables.counts.edit(at, path, before.summaries.files.get(path), -1).edit(
            at, path, after.summaries.files.get(path), +1
        )
        tables.keys[at] = key
        if at not in tables.edited:
            tables.edited.append(at)
    return tables


class _Files(Mapping[str, Optional[FileSummary]]):
    """`Summaries.files` whose summaries are decoded on first access (`index`), with the summaries
    a frame lays over them (`Summaries.with_file`)."""

    def __init__(self, index: "LazyIndex", over: Dict[str, Optional[FileSummary]]) -> None:
        self._index = index
        self._over = over

    def __getitem__(self, path: str) -> Optional[FileSummary]:
        if path in self._over:
            return self._over[path]
        if path not in self._index.summarised:
            raise KeyError(path)
        return self._index.part(path).summaries.files[path]

    def __iter__(self) -> Iterator[str]:
        yield from self._index.summarised
        yield from (path for path in self._over if path not in self._index.summarised)

    def __len__(self) -> int:
        return len(self._index.summarised) + sum(1 for path in self._over if path not in self._index.summarised)

    def __contains__(self, path: object) -> bool:
        return path in self._over or path in self._index.summarised


class _Passed(Mapping[str, Set[str]]):
    """`Summaries._names()[1]`: a name called -> the kinds some call passes it, from the counts."""

    def __init__(self, passes: Dict[str, Dict[str, int]]) -> None:
        self._passes = passes

    def __getitem__(self, name: str) -> Set[str]:
        return set(self._passes[name])

    def __contains__(self, name: object) -> bool:
        return name in self._passes

    def __iter__(self) -> Iterator[str]:
        return iter(self._passes)

    def __len__(self) -> int:
        return len(self._passes)


class LazySummaries(Summaries):
    """`Summaries` over the project's files, each decoded when a question reaches it, with the
    answers that read every file from the tables; a frame (`with_file`) shares the decoded files
    and changes the counts for its own file only."""

    def __init__(
        self, index: "LazyIndex", counts: Counts, over: Dict[str, Optional[FileSummary]]
    ) -> None:  # no super().__init__(): it copies every file
        self.index = index
        self.counts = counts
        self.files = _Files(index, over)  # type: ignore[assignment]
        self.buffers = {}
        self._stems = None
        self._subclasses = None
        self._forget()

    def _names(self) -> Tuple[Dict[str, List[tuple]], Dict[str, Set[str]]]:
        """The names only (`producer_names`, `_among`): what they produce is `_produces`'s."""
        return self.counts.producers, _Passed(self.counts.passes)  # type: ignore[return-value]

    def _calls_named(self, path: str, cls: Optional[str], name: str) -> Iterable[Tuple[str, CallFact]]:
        """As `Summaries._calls_named`, from the files that can call `name` of `path`: those the
        tables found calling it, and those changed since (edited, or this frame's own) with a call
        of that name; the others' calls cannot reach it (`Tables.called`)."""
        files = self.counts.calls.get(name)
        if not files:
            return ()
        callee = self.index.at.get(path)
        stored = self.index.called.get((callee, cls or "", name), ()) if callee is not None else ()
        fresh = self.index.edited.union(self.index.at[p] for p in self.files._over if p in self.index.at)  # type: ignore[attr-defined]
        wanted = set(files).intersection(fresh.union(stored))
        found: List[Tuple[str, CallFact]] = []
        for at in sorted(wanted):
            where = self.index.paths[at]
            summary = self.files[where]
            assert summary is not None  # the counts name files with calls
            found += [(where, fact) for fact in summary.calls if name in call_names(summary, fact)]
        return found

    def _produces(self, kinds: FrozenSet[str], word: str) -> bool:
        return not kinds.isdisjoint(self.index.produce.get(word, ()))

    def _find_override(self, cls: Instance, name: str) -> bool:
        """As `Summaries._find_override`, from the stored subclasses and members, which name
        files by their positions (turning every entry into paths cost a one-file run ~5 ms)."""
        at = self.index.at.get(cls[0])
        if at is None:  # not a file of the tables: none of their classes derives from it
            return False
        tables = self.index._tables
        seen: Set[Tuple[int, str]] = {(at, cls[1])}
        todo = [(at, cls[1])]
        while todo:
            for sub in tables.children.get(todo.pop(), ()):
                if sub in seen:
                    continue
                if name in tables.members[sub]:
                    return True
                seen.add(sub)
                todo.append(sub)
        return False

    def with_file(self, path: str, summary: Optional[FileSummary]) -> Summaries:
        """The frame of a file linted: its own summary over the stored one. One that differs in
        what the stored answers read (`names_part`) gets the whole summaries, as before."""
        at = self.index.at.get(path)
        if at is None or path not in self.files or names_part(self.files[path]) != names_part(summary):
            return Summaries({**{p: self.files[p] for p in self.files}, path: summary})
        counts = self.counts.edit(at, path, self.files[path], -1).edit(at, path, summary, +1)
        return LazySummaries(self.index, counts, {**self.files._over, path: summary})  # type: ignore[attr-defined]

    def without(self, path: str) -> Summaries:
        return Summaries({p: self.files[p] for p in self.files if p != path})

    def absorb(self, other: Summaries) -> None:
        raise TypeError("a lazy project's summaries are read, never added to")


class LazyIndex(ProjectIndex):
    """The project index of a one-file run: the finalized results and name tables from `Tables`,
    each file's facts decoded on first need (`load`). Its dataclass fields are never set:
    reading one builds the whole index (`whole`) and reads it there."""

    def __init__(
        self, tables: Tables, load: Load, whole: Callable[[], ProjectIndex]
    ) -> None:  # the dataclass init is not called: see the class
        self._tables = tables
        self._load = load
        self._whole = whole
        self._materialized: Optional[ProjectIndex] = None
        self._parts: Dict[str, ProjectIndex] = {}
        self.at = {path: at for at, path in enumerate(tables.paths)}
        self.summarised = {tables.paths[at]: None for at in tables.summarised}
        self.paths = tables.paths
        self.produce = {name: frozenset(kinds) for name, kinds in tables.produce.items()}
        self.called = tables.called
        self.edited = frozenset(tables.edited)
        self.summaries = LazySummaries(self, tables.counts, {})
        self.reached = tables.reached

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(name)
        if self._materialized is None:
            self._materialized = self._whole()
        return getattr(self._materialized, name)

    def part(self, path: str) -> ProjectIndex:
        """The facts of the file at `path`, its classes' kinds as `finalize` gave them."""
        return self.parts([path])[0]

    def parts(self, paths: Sequence[str]) -> List[ProjectIndex]:
        wanted = [path for path in dict.fromkeys(paths) if path not in self._parts]
        if wanted:
            for path, part in self._load(wanted).items():
                for info, (kind, protected) in zip(_classes(part), self._tables.kinds[self.at[path]]):
                    info.kind, info.protected = kind, protected
                self._parts[path] = part
        return [self._parts[path] for path in paths]

    def _files(self, table: Dict[str, List[int]], name: str) -> List[ProjectIndex]:
        return self.parts([self._tables.paths[at] for at in table.get(name, ())])

    def lookup(self, name: str, qual: Optional[str], from_path: str) -> Optional[ClassInfo]:
        if qual is not None and qual.startswith("torch."):
            return None
        simple = qual.rsplit(".", 1)[-1] if qual else name
        found = [info for part in self._files(self._tables.classes, simple) for info in part.classes.get(simple, ())]
        if found:
            return _pick(found, qual, from_path)
        aliases = [alias for part in self._files(self._tables.aliases, simple) for alias in part.aliases.get(simple, ())]
        alias = _pick(aliases, qual, from_path)
        if alias is None or alias.target == simple:
            return None
        named = [info for part in self._files(self._tables.classes, alias.target) for info in part.classes.get(alias.target, ())]
        return _pick(named, alias.qual, alias.path)

    def function(self, name: str, qual: Optional[str], from_path: str) -> Optional[FuncInfo]:
        if qual is not None and qual.startswith("torch."):
            return None
        simple = qual.rsplit(".", 1)[-1] if qual else name
        found = [part.functions[key] for part in self._files(self._tables.toplevel, simple) for key in part.toplevel.get(simple, ())]
        return _pick(found, qual, from_path)

    def fp16_sites(self) -> List[Site]:
        return list(self._tables.sites)

    def has_scaler(self) -> bool:
        return self._tables.scaler
