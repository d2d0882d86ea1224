"""A file's graph facts after an edit that only moved them: the finalized project facts patched
for the new positions instead of finalized again.

Why: what `ProjectIndex.finalize` reads of a file (`project_tables.graph_part`) names each function
by a "path:line:name" key and each fp16 region by its site's line and column, so a line added at
the top of a file changes all of them, although the call graph, the class kinds and what each
region reaches are as they were. Finalizing again costs a pass over every file's facts (a
pre-commit run decodes them all from the pack; the server copies every class and walks the call
graph: 80-150 ms on diffusers) for results that differ only in those positions.

`moves` compares a file's graph facts before and after an edit with every position taken out
(`_Canon`: a key's line becomes its ordinal in the file, a site's line and column zero, a
builder's "path:line" a placeholder), dicts compared as ordered item lists, since `finalize`'s
walk follows their order. When the two agree, `finalize` over the project gives the same results
up to those positions, and `Moves` maps them: each function key of the file, each region site's
(line, column), and the lines of the file a builder's `Site.via` text cites. The file's regions
must also keep their order by position (`_reach` visits regions sorted by it, and the first to
reach a function is the one a finding cites). Any other difference (a function, class, call,
region or alias added, removed, renamed, or reordered; two facts of one line split across lines)
gives None: the caller finalizes again.

Positions a finding prints from the file's own facts (a class's line, a forward's spans) are not
mapped here: the callers read them from the file's fresh facts.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from torchnumlint.index import ClassInfo, FuncInfo, ProjectIndex, Ref, Site

# Refs that carry "path:line" (where `create_model` or Hydra's `instantiate` is called), at this place.
_CITED_AT = {"model_fns": 2, "hydra": 1}

Position = Tuple[int, int]  # (line, col) of a site


class _Canon:
    """Takes the positions out of one file's graph facts, recording them in the order met."""

    def __init__(self) -> None:
        self.keys: Dict[str, str] = {}  # real key -> its position-free form
        self.order: List[str] = []  # real keys, in the order first met
        self.cited: List[int] = []  # lines a `via` text can cite: each key's, each builder ref's
        self.sites: List[Position] = []  # each region site's

    def key(self, key: str) -> str:
        found = self.keys.get(key)
        if found is None:
            head, line, name = key.rsplit(":", 2)
            found = self.keys[key] = f"{head}:#{len(self.order)}:{name}"
            self.order.append(key)
            self.cited.append(int(line))
        return found

    def ref(self, ref: Ref) -> Ref:
        at = _CITED_AT.get(str(ref[0]))
        if at is None or at >= len(ref) or not isinstance(ref[at], str):
            return ref
        head, line = str(ref[at]).rsplit(":", 1)
        self.cited.append(int(line))
        return ref[:at] + (f"{head}:#",) + ref[at + 1 :]

    def func(self, func: FuncInfo) -> FuncInfo:
        return dataclasses.replace(func, key=self.key(func.key), refs=[self.ref(ref) for ref in func.refs])

    def site(self, site: Site) -> Site:
        self.sites.append((site.line, site.col))
        return dataclasses.replace(site, line=0, col=0)

    def cls(self, info: ClassInfo) -> ClassInfo:
        methods = {name: self.key(key) for name, key in info.methods.items()}
        return dataclasses.replace(info, line=0, forward=None, methods=methods)

    def shape(self, part: ProjectIndex) -> tuple:
        """What `finalize` reads of `part`, positions taken out, every dict as its ordered items."""
        functions = [(self.key(key), self.func(func)) for key, func in part.functions.items()]
        return (
            functions,
            [(name, [self.key(key) for key in keys]) for name, keys in part.toplevel.items()],
            [(name, [self.cls(info) for info in infos]) for name, infos in part.classes.items()],
            [(self.site(site), self.func(body)) for site, body in part.regions],
            [dataclasses.replace(site, line=0, col=0) for site in part.scaler_sites],
            list(part.aliases.items()),
            list(part.targets.items()),
        )


@dataclass
class Moves:
    """How one file's positions moved (see the module): maps what the finalized facts hold."""

    path: str
    keys: Dict[str, str]  # old function key -> new
    lines: Dict[int, int]  # old line -> new, of the lines a `via` text cites
    sites: Dict[Position, Position]  # a region site's old (line, col) -> new
    _cites: "re.Pattern[str]" = field(init=False, repr=False)  # "(path:line)" in a `via` text

    def __post_init__(self) -> None:
        self._cites = re.compile(r"\(" + re.escape(self.path) + r":(\d+)\)")

    def key(self, key: str) -> str:
        return self.keys.get(key, key)

    def site(self, site: Site) -> Site:
        """`site` as it is now: its own position when it is in the file, the file's lines its `via` cites."""
        via = self._cites.sub(lambda m: f"({self.path}:{self.lines.get(int(m.group(1)), int(m.group(1)))})", site.via) if site.via else ""
        if site.path == self.path:
            line, col = self.sites[(site.line, site.col)]
            return dataclasses.replace(site, line=line, col=col, via=via)
        return dataclasses.replace(site, via=via) if via != site.via else site

    def reached(self, reached: Dict[str, Site]) -> Dict[str, Site]:
        """`ProjectIndex.reached` with the file's keys and sites as they are now, in the same order."""
        return {self.key(key): self.site(site) for key, site in reached.items()}


def moves(path: str, before: ProjectIndex, after: ProjectIndex) -> Optional[Moves]:
    """How `path`'s graph facts moved from `before` to `after` (both its facts alone, as
    `index_file` gives them: not finalized); None when they differ in more than positions."""
    old, new = _Canon(), _Canon()
    if old.shape(before) != new.shape(after):
        return None
    if _ranks(old.sites) != _ranks(new.sites):
        return None  # two regions swapped their order: another may reach first
    lines = _paired(old.cited, new.cited)
    sites = _paired(old.sites, new.sites)
    if lines is None or sites is None:
        return None  # two facts of one line now on two lines (or the reverse)
    return Moves(path, dict(zip(old.order, new.order)), lines, sites)


def _ranks(positions: List[Position]) -> List[int]:
    """Each position's rank among the distinct ones: the order a sort by position gives, ties kept."""
    rank = {position: at for at, position in enumerate(sorted(set(positions)))}
    return [rank[position] for position in positions]


def _paired(old: list, new: list) -> Optional[dict]:
    """old[i] -> new[i], when no old value is paired with two new ones and no two old with one new."""
    pairs = dict(zip(old, new))
    if any(pairs[a] != b for a, b in zip(old, new)) or len(set(pairs.values())) != len(pairs):
        return None
    return pairs


def moved_index(last: ProjectIndex, before: ProjectIndex, after: ProjectIndex, path: str) -> Optional[ProjectIndex]:
    """The finalized index `last`, made with `before` as `path`'s facts (merged last, their
    classes copied), with `after` in their place, without finalizing again; None when `path`'s
    graph facts differ in more than positions (`moves`). The other files' facts are shared with
    `last`, whose own are left as they were; the summaries are left empty for the caller."""
    moved = moves(path, before, after)
    if moved is None:
        return None
    copies: Dict[int, ClassInfo] = {}  # id of the class in `last` -> its copy from `after`, finalized as it was
    classes: Dict[str, List[ClassInfo]] = {}
    for name, infos in last.classes.items():
        kept = [info for info in infos if info.path != path]
        olds = infos[len(kept) :]  # `path`'s own, merged last
        if any(old.path != path for old in olds):
            return None  # not merged last: a fresh merge would order them otherwise
        for old, new in zip(olds, after.classes.get(name, ())):
            copies[id(old)] = copy = dataclasses.replace(new)
            copy.kind, copy.protected = old.kind, old.protected
        classes[name] = kept + [copies[id(old)] for old in olds]
    functions = {key: func for key, func in last.functions.items() if func.path != path}
    functions.update(after.functions)
    return ProjectIndex(
        classes=classes,
        functions=functions,
        toplevel={
            name: [key for key in keys if last.functions[key].path != path] + after.toplevel.get(name, [])
            for name, keys in last.toplevel.items()
        },
        regions=[region for region in last.regions if region[0].path != path] + after.regions,
        scaler_sites=[site for site in last.scaler_sites if site.path != path] + after.scaler_sites,
        reached=moved.reached(last.reached),
        aliases=last.aliases,
        subclasses={name: [copies.get(id(info), info) for info in infos] for name, infos in last.subclasses.items()},
        files=last.files - before.files + after.files,
        targets=last.targets,
    )
