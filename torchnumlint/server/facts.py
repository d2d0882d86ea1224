"""The project facts the lint process keeps in memory between edits (`worker.py`).

A finding can need facts from other files of the project (a helper returning a softmax, an fp16
region calling a module): `torchnumlint` gathers them from every file on each run. An editor
changes one buffer many times a second, so here the facts of each file on disk are gathered once
per project (a file at a time, between requests: the first lints are answered meanwhile
with the buffer's own facts, as the flake8 plugin does), then kept, and a buffer is linted
against the others' kept facts and its own text's. A file's facts change only when the editor
says so (a save, a watched file created, changed or deleted).

Assembling the project's index for a buffer costs a pass over every file's facts, and a fresh
index works out again, on first use, what the project's helpers produce (the rules' pre-filter
asks it: most of a lint's time when it is cold, 0.3 s CPU measured on a diffusers file); so the
index made for a buffer is kept with the buffer's own facts and reused as long as an edit leaves
those facts as they were (a comment, a string, an expression that names no helper). When they
changed but the buffer's summary agrees with the last one in all the answers about helpers read
(`project_tables.names_part`: its functions, classes, values and imports, not its calls, whose
positions move with every line added above them), the new index keeps the last one's answers
(`Summaries.keep_answers`). A helper of the buffer that changes what it returns, or a file
changed on disk, makes them be worked out again. The class kinds and fp16 reach
(`ProjectIndex.finalize`) are not worked out again when the buffer's classes, functions and
regions only moved (a line added above them): the last index is patched for their new positions
(`moves.moved_index`, which shares the other files' finalized classes); any other change to them
finalizes the project's facts again.

A buffer's index reads every file's facts but its own file's on disk, so a save of the buffer
(its facts read again from the text saved) leaves its kept index valid and makes only the other
buffers' go; a save whose facts are those already kept (a comment, a string) makes none go. The
other files' call sites, indexed by callee name for the caller lookups, are kept with their merged
facts (`calls.py`).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

from torchnumlint.config import Settings
from torchnumlint.discovery import project_files, project_root
from torchnumlint.index import ProjectIndex, index_file
from torchnumlint.moves import moved_index
from torchnumlint.project_tables import names_part
from torchnumlint.server.calls import BufferCalls, OtherCalls
from torchnumlint.source import SourceError, read_source

# How many buffers' assembled indexes are kept (each holds a copy of the project's classes).
KEPT_INDEXES = 8


class ProjectFacts:
    """The facts of one project's files as on disk, by absolute path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.parts: Dict[str, ProjectIndex] = {}
        self._todo: Optional[Iterator[str]] = None
        self.complete = False
        self.seconds = 0.0  # spent gathering
        self.generation = 0  # bumped whenever a file's facts change
        # the generation at which each file's facts last changed (None: every file's, once gathered)
        self._changed: Dict[Optional[str], int] = {}
        self._rest: Dict[str, Tuple[int, ProjectIndex, OtherCalls]] = {}  # path -> every other file's facts
        # path -> (generation, the buffer's text, its facts, the index made for it)
        self._made: "OrderedDict[str, Tuple[int, str, ProjectIndex, ProjectIndex]]" = OrderedDict()

    def step(self, settings: Settings, files: int = 1) -> bool:
        """Gather the facts of up to `files` more files; True once every file's are known."""
        if self.complete:
            return True
        started = time.monotonic()
        if self._todo is None:
            self._todo = project_files(str(self.root), settings)
        try:
            for _ in range(files):
                path = next(self._todo, None)
                if path is None:
                    self.complete = True
                    self._bump(None)
                    return True
                if path not in self.parts:  # a buffer saved meanwhile is newer than what is read now
                    try:
                        self.parts[path] = index_file(path, read_source(path).text)
                    except SourceError:
                        continue  # as in a run: a file that cannot be read adds no facts
            return False
        finally:
            self.seconds += time.monotonic() - started

    def update(self, path: str, text: Optional[str]) -> None:
        """`path` now holds `text` (None: it is gone or cannot be read)."""
        if text is None:
            if self.parts.pop(path, None) is None:
                return
        else:
            made = self._made.get(path)
            facts = made[2] if made is not None and made[1] == text else index_file(path, text)  # a buffer saved as linted
            if self.parts.get(path) == facts:  # no index made from them can differ
                return
            self.parts[path] = facts
        self._bump(path)

    def _bump(self, path: Optional[str]) -> None:
        self.generation += 1
        self._changed[path] = self.generation

    def _stale(self, path: str, generation: int) -> bool:
        """Whether a file other than `path` changed its facts after `generation` (what `path`'s
        index was made from: every file's facts but its own on disk)."""
        return any(when > generation for changed, when in self._changed.items() if changed != path)

    def refresh(self, path: str) -> None:
        """Read `path` again from disk (a watched file changed)."""
        try:
            text: Optional[str] = read_source(path).text if os.path.isfile(path) else None
        except SourceError:
            text = None
        self.update(path, text)

    def index_for(self, path: str, text: str) -> ProjectIndex:
        """The project's index with `text` standing for `path`'s file."""
        made = self._made.get(path)
        if made is not None and self._stale(path, made[0]):
            made = None
        if made is not None and made[1] == text:  # linted again as it was (a save, a reopened file)
            self._made.move_to_end(path)
            return made[3]
        own = index_file(path, text)
        if made is not None and made[2] == own:
            self._made[path] = (made[0], text, own, made[3])
            self._made.move_to_end(path)
            return made[3]
        rest, other_calls = self._others(path)
        # the buffer's classes, functions and regions moved at most: the last index, patched (`moves.py`)
        index = moved_index(made[3], made[2], own, path) if made is not None else None
        patched = index is not None
        if index is None:
            index = ProjectIndex.empty()
            index.absorb(rest, copy_classes=True)  # finalize() writes to each class: the kept ones stay as read
            index.absorb(own, copy_classes=True)
        else:
            index.summaries.absorb(rest.summaries)
            index.summaries.absorb(own.summaries)
        if made is not None and made[2].summaries == own.summaries:
            # only classes, functions, regions or their positions moved: what the project's
            # helpers produce and who calls them is as it was, and the last index worked much of it out
            index.summaries = made[3].summaries
        elif made is not None and same_names(made[2], own, path):
            # a call moved, was typed or went (every line below a new one moves its call sites):
            # what the helpers produce reads none of that (`project_tables.names_part`)
            index.summaries.keep_answers(made[3].summaries)
        if not patched:
            index.finalize()
        # (the last index's summaries, kept, have made their table already)
        index.summaries.use_calls(lambda: BufferCalls(other_calls, path, index.summaries.files.get(path)))
        self._made[path] = (self.generation, text, own, index)
        self._made.move_to_end(path)
        while len(self._made) > KEPT_INDEXES:
            forgotten, _ = self._made.popitem(last=False)
            self._rest.pop(forgotten, None)
        return index

    def basis(self, path: str) -> Optional[Tuple[ProjectIndex, ProjectIndex]]:
        """What the last index made for `path` was made from: every other file's facts, merged
        (the very same object while none of them changed), and the buffer's own facts; None when
        not known."""
        made, rest = self._made.get(path), self._rest.get(path)
        if made is None or rest is None or self._stale(path, rest[0]):
            return None
        return rest[1], made[2]

    def _others(self, path: str) -> Tuple[ProjectIndex, OtherCalls]:
        """Every other file's facts, merged (not finalized), and their call sites, kept while
        none of those files' facts change."""
        rest = self._rest.get(path)
        if rest is None or self._stale(path, rest[0]):
            others = ProjectIndex.empty()
            for other, part in self.parts.items():
                if other != path:
                    others.absorb(part)
            rest = self._rest[path] = (self.generation, others, OtherCalls(others.summaries.files))
        return rest[1], rest[2]


def same_names(before: ProjectIndex, after: ProjectIndex, path: str) -> bool:
    """Whether `path`'s summaries in both facts agree in all that the summaries' answers about
    producers read (`project_tables.names_part`)."""
    old, new = before.summaries.files, after.summaries.files
    return (path in old) == (path in new) and names_part(old.get(path)) == names_part(new.get(path))


class Projects:
    """Each project's facts, by its root (the folder `discovery.project_root` finds)."""

    def __init__(self) -> None:
        self._roots: Dict[Path, Optional[Path]] = {}
        self.by_root: Dict[Path, ProjectFacts] = {}

    def root_of(self, path: str) -> Optional[Path]:
        return project_root(Path(os.path.abspath(path)).parent, self._roots)

    def of(self, path: str) -> Optional[ProjectFacts]:
        """The facts of `path`'s project (started on first ask); None for a file in no project."""
        root = self.root_of(path)
        if root is None:
            return None
        if root not in self.by_root:
            self.by_root[root] = ProjectFacts(root)
        return self.by_root[root]

    def known(self, path: str) -> Optional[ProjectFacts]:
        """The facts of `path`'s project if they are being kept."""
        root = self.root_of(path)
        return self.by_root.get(root) if root is not None else None

    def gathering(self) -> Optional[ProjectFacts]:
        return next((facts for facts in self.by_root.values() if not facts.complete), None)
