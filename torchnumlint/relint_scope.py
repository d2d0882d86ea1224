"""Which top-level statements of a buffer an edit can change the findings of, and the findings of
the others carried over from the last lint, moved with the lines.

Why: the language server lints the whole buffer at every change, and in a large file most of a
change's time is the LibCST parse and rule walk of statements the edit cannot touch (a 60 KB
diffusers script: ~0.9 s of CPU per keystroke). A finding sits in one top-level statement, and
what its rules read beyond that statement they reach by name (`candidates.py`): a helper, a base
class, a module-level value, the call sites of its function. So an edit inside one top-level
function or class changes the findings of that statement and of the statements linked to it by
name, transitively, in the text before the edit and after it; the others' findings only move by
the edit's lines, as long as the project facts answer every question their lint asked as before
(the caller replays them, `fact_reads.Replay`).

`plan` compares the last text with the new one line by line: the lines that differ (widened to
whole lines) are the edit's region. Statements wholly before it keep their positions; those after
it move by the edit's line and character counts. The statements the region touches must be
functions or classes alone on their lines (else None: the caller lints the whole buffer), and the
region must hold no noqa comment (a file-wide `# flake8: noqa` applies to every statement). The
linked statements, kept whole (`_Links`), are a superset of what `candidates._groups` links: every
word of a statement's text, comments and strings included, names what another binds (its name,
the names it imports anywhere) or, for a class, one of its methods (a call `obj.mean(...)` may be
a call of any class's `mean`). Module-level statements other than imports relay a link when they
name a function or class of the file, as in `candidates`.

Module-level code (imports, assignments, `if` blocks) is never masked, and a rule may judge it
against the whole module (an import "unused here"), which a lint with functions masked does not
show: its findings are always the last ones, carried, and where the edit can reach it (it is
linked to the edit, reads a name the edit binds, or the edit adds or removes the only use of one
of its names) the whole buffer is linted instead (`_module_code_apart`).

A carried finding whose message holds a digit may cite a line of the file (`(line 14)`,
`model.py:8`), which an edit that adds or removes lines may move: when lines move, its statement is
linted again too. Everything else of a carried finding (its lines, its fix's offsets and rows) is
moved here. `Plan.masked` lists the functions and classes not linted again, which
`engine.lint_text` masks (`prepass.mask`: same length and lines), so LibCST's positions, the
noqa comments and the pre-filter are the whole text's.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Set, Tuple

from torchnumlint.findings import Edit, Finding
from torchnumlint.prepass import Lines
from torchnumlint.rules.imports import imports_torch

_MASKABLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_WORD = re.compile(r"[^\W\d]\w*")
_DIGIT = re.compile(r"\d")
_NOQA = re.compile("noqa", re.IGNORECASE)
_LONE_CR = re.compile(r"\r(?!\n)")


class Part(NamedTuple):
    """A top-level statement: its lines (decorators included), the characters `prepass.mask`
    replaces, whether it may be masked, and the names by which others reach it."""

    first: int
    last: int
    span: Tuple[int, int]
    text: str  # its whole lines
    maskable: bool
    relay: bool  # a module-level statement (not an import) that names a function or class of the file
    names: FrozenSet[str]  # what it binds, and a class's methods
    words: FrozenSet[str]


class Snapshot:
    """A linted text split into its top-level statements."""

    def __init__(self, text: str, tree: ast.Module) -> None:
        self.text = text
        self.lines = Lines(text)
        self.parts = _parts(text, tree, self.lines)

    def line_start(self, line: int) -> int:
        """The offset of 1-based `line`'s first character (the text's length past its end)."""
        return self.lines.starts[line - 1] if line <= len(self.lines.starts) else len(self.text)


def _parts(text: str, tree: ast.Module, lines: Lines) -> List[Part]:
    body = tree.body
    firsts = [min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]) for node in body]
    lasts = [node.end_lineno or node.lineno for node in body]
    defined: Set[str] = {node.name for node in body if isinstance(node, _MASKABLE)}
    out = []
    for i, node in enumerate(body):
        start = lines.starts[firsts[i] - 1]
        end = lines.starts[lasts[i]] if lasts[i] < len(lines.starts) else len(text)
        whole = text[start:end]
        words = frozenset(_WORD.findall(whole))
        alone = (i == 0 or lasts[i - 1] < firsts[i]) and (i + 1 == len(body) or firsts[i + 1] > lasts[i])
        maskable = alone and isinstance(node, _MASKABLE)
        relay = not maskable and not isinstance(node, (ast.Import, ast.ImportFrom)) and bool(words & defined)
        out.append(Part(firsts[i], lasts[i], lines.span(node), whole, maskable, relay, _names(node), words))
    return out


def _names(node: ast.stmt) -> FrozenSet[str]:
    """The names a statement binds at module level, those it imports anywhere, and a class's
    methods (and other members defined in its body)."""
    names: Set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in inner.names)
    if isinstance(node, _MASKABLE):
        names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(stmt.name for stmt in ast.walk(node) if isinstance(stmt, _MASKABLE))
        return frozenset(names)
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
            names.add(inner.id)
        elif isinstance(inner, _MASKABLE):
            names.add(inner.name)
    return frozenset(names)


class _Links:
    """The statements linked by name to some statements, transitively (see the module)."""

    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = parts
        self.linking = [i for i, part in enumerate(parts) if part.maskable or part.relay]
        self.named: Dict[str, List[int]] = {}
        for i in self.linking:
            for name in parts[i].names:
                self.named.setdefault(name, []).append(i)

    def closure(self, seeds: Set[int]) -> Set[int]:
        found = set(seeds)
        todo = list(seeds)
        while todo:
            part = self.parts[todo.pop()]
            near = {j for word in part.words if word in self.named for j in self.named[word]}
            near.update(j for j in self.linking if part.names & self.parts[j].words)
            for j in near - found:
                found.add(j)
                todo.append(j)
        return found


class Region(NamedTuple):
    """The lines an edit replaced: old lines [first, old_end) became new lines [first, new_end)."""

    first: int
    old_end: int
    new_end: int


def region(old: str, new: str) -> Optional[Region]:
    """The whole lines that differ between `old` and `new`; None when the texts are equal."""
    if old == new:
        return None
    shortest = min(len(old), len(new))
    p = 0
    while p < shortest and old[p] == new[p]:
        p += 1
    s = 0
    while s < shortest - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    p = old.rfind("\n", 0, p) + 1  # back to the start of its line (the same in both texts)
    old_end, new_end = len(old) - s, len(new) - s
    while not (_line_start(old, old_end) and _line_start(new, new_end)):  # on to a line start in both
        old_end, new_end = old_end + 1, new_end + 1
    first = old.count("\n", 0, p) + 1
    return Region(first, first + old.count("\n", p, old_end), first + new.count("\n", p, new_end))


def _line_start(text: str, at: int) -> bool:
    return at == 0 or at >= len(text) or text[at - 1] == "\n"


class Plan:
    """What to lint again after an edit, and how the last findings of the rest move."""

    def __init__(self, old: Snapshot, new: Snapshot, edit: Region, linked: Set[int], before: int, shift: int) -> None:
        self.old, self.new, self.edit = old, new, edit
        self.kept = {i for i in linked if new.parts[i].maskable}  # the functions and classes linted again
        self.before = before  # parts wholly before the region (the same in both)
        self.shift = shift  # new part index - old part index, for the parts after the region
        self.lines = edit.new_end - edit.old_end
        self.chars = len(new.text) - len(old.text)
        self._old_start = old.line_start(edit.first)
        self._old_end = old.line_start(edit.old_end)
        # None: nothing is linked to the edit, nothing to lint (a comment or a blank line between statements)
        self.masked: Optional[List[Tuple[int, int]]] = None
        if linked:
            self.masked = [part.span for i, part in enumerate(new.parts) if part.maskable and i not in self.kept]

    def carried_text(self) -> str:
        """The text of the statements not linted again (module-level code included), whose
        findings are carried over, one after the other."""
        return "\n".join(part.text for i, part in enumerate(self.new.parts) if i not in self.kept)

    def fresh(self, findings: List[Finding]) -> List[Finding]:
        """The findings of a lint with `masked` masked that stand: those of the statements linted again."""
        return [f for f in findings if _part_at(self.new.parts, f.line) in self.kept]

    def carried(self, last: List[Finding]) -> Optional[List[Finding]]:
        """The last findings of the statements not linted again, and between statements, moved;
        None where one cannot be."""
        out = []
        for finding in last:
            part = _part_at(self.old.parts, finding.line)
            if part is not None:
                at = self._new_index(part)
                if at is None or at in self.kept:
                    continue  # in a statement the edit touched (gone, or linted again) or linked to it
            moved = self._moved(finding)
            if moved is None:
                return None
            out.append(moved)
        return out

    def _new_index(self, old_index: int) -> Optional[int]:
        if old_index < self.before:
            return old_index
        if self.old.parts[old_index].first >= self.edit.old_end:
            return old_index + self.shift
        return None

    def _line(self, line: int) -> Optional[int]:
        if line < self.edit.first:
            return line
        if line >= self.edit.old_end:
            return line + self.lines
        return None

    def _offsets(self, start: int, end: int) -> Optional[int]:
        """How far characters [start, end) of the old text moved (None: the edit touched them)."""
        if end <= self._old_start:
            return 0
        if start >= self._old_end:
            return self.chars
        return None

    def _moved(self, finding: Finding) -> Optional[Finding]:
        line, end_line = self._line(finding.line), self._line(finding.end_line)
        noqa = [self._line(n) for n in finding.noqa_lines]
        if line is None or end_line is None or None in noqa:
            return None
        fix = finding.fix
        if fix is not None:
            edits = []
            for edit in fix.edits:
                by = self._offsets(edit.start, edit.end)
                if by is None:
                    return None
                rows = 0 if by == 0 else self.lines
                edits.append(
                    Edit(
                        edit.start + by,
                        edit.end + by,
                        edit.content,
                        (edit.location[0] + rows, edit.location[1]),
                        (edit.end_location[0] + rows, edit.end_location[1]),
                    )
                )
            fix = fix._replace(edits=tuple(edits))
        return finding.replace(line=line, end_line=end_line, noqa_lines=tuple(noqa), fix=fix)


def _part_at(parts: Sequence[Part], line: int) -> Optional[int]:
    return next((i for i, part in enumerate(parts) if part.first <= line <= part.last), None)


def plan(old: Snapshot, new: Snapshot, last: List[Finding]) -> Optional[Plan]:
    """What an edit from `old` to `new` makes to lint again, given `last`, the findings of `old`;
    None where the whole buffer must be linted (see the module)."""
    if _LONE_CR.search(old.text) or _LONE_CR.search(new.text):
        return None  # lines broken by a lone "\r": `region` counts "\n" only
    edit = region(old.text, new.text)
    if edit is None:
        return None
    old_touched = [i for i, part in enumerate(old.parts) if part.last >= edit.first and part.first < edit.old_end]
    new_touched = [i for i, part in enumerate(new.parts) if part.last >= edit.first and part.first < edit.new_end]
    if not all(old.parts[i].maskable for i in old_touched) or not all(new.parts[i].maskable for i in new_touched):
        return None
    before = sum(1 for part in old.parts if part.last < edit.first)
    if before != sum(1 for part in new.parts if part.last < edit.first):
        return None
    after = len(old.parts) - before - len(old_touched)
    shift = len(new.parts) - len(old.parts)
    if after != len(new.parts) - before - len(new_touched) or not _same_parts(old, new, before, shift, edit):
        return None
    old_text = old.text[old.line_start(edit.first) : old.line_start(edit.old_end)]
    new_text = new.text[new.line_start(edit.first) : new.line_start(edit.new_end)]
    if _NOQA.search(old_text) or _NOQA.search(new_text):
        return None  # a file-wide noqa comment applies to every statement
    if imports_torch(old.text) != imports_torch(new.text):
        return None  # no rule reports in a file that does not import torch
    seeds_old = set(old_touched)
    seeds_new = set(new_touched)
    if edit.new_end != edit.old_end:  # lines move: a message citing a line may change
        for finding in last:
            at = _part_at(old.parts, finding.line)
            if at is not None and _DIGIT.search(finding.message):
                seeds_old.add(at)
    mapped = Plan(old, new, edit, set(), before, shift)._new_index
    links = _Links(new.parts)
    linked = links.closure(seeds_new | {j for i in _Links(old.parts).closure(seeds_old) if (j := mapped(i)) is not None})
    if not _module_code_apart(old, new, old_touched, new_touched, linked):
        return None
    return Plan(old, new, edit, linked, before, shift)


def _module_code_apart(old: Snapshot, new: Snapshot, old_touched: List[int], new_touched: List[int], linked: Set[int]) -> bool:
    """Whether no module-level statement (an import, an assignment, an `if` block) can see the
    edit: none is linked to it or reads what it binds, and the edit adds or removes the only use
    of none of their names (an import "unused here"). A lint with functions masked would judge
    such a statement against the unmasked ones only, so its findings are the last ones, or the
    whole buffer is linted."""
    names = frozenset().union(*(old.parts[i].names for i in old_touched), *(new.parts[i].names for i in new_touched))
    before = frozenset().union(*(old.parts[i].words for i in old_touched))
    after = frozenset().union(*(new.parts[i].words for i in new_touched))
    changed = before ^ after
    uses = Counter(word for i, part in enumerate(new.parts) if i not in new_touched for word in part.words)
    for i, part in enumerate(new.parts):
        if part.maskable:
            continue
        if i in linked or part.words & names:
            return False
        if any(uses[name] - (name in part.words) == 0 for name in part.names & changed):
            return False
    return True


def _same_parts(old: Snapshot, new: Snapshot, before: int, shift: int, edit: Region) -> bool:
    """Whether the statements outside the region are the same in both texts, those after it moved."""
    moved = edit.new_end - edit.old_end
    for i, part in enumerate(old.parts):
        if i < before:
            other = new.parts[i]
            if other.first != part.first or other.last != part.last or other.text != part.text:
                return False
        elif part.first >= edit.old_end:
            other = new.parts[i + shift]
            if other.first != part.first + moved or other.last != part.last + moved or other.text != part.text:
                return False
    return True
