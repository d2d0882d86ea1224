"""An edit that only moves a file's facts is mapped onto the finalized facts (`moves.py`) instead
of finalizing again: what the mapping gives must be what a fresh finalize over the edited project
gives, for the stored tables of a one-file run (`project_tables.updated`) and for the server's last
index (`moves.moved_index`); an edit that changes more must not be mapped.

The project: the YOLO-like model (an fp16 region in `train.py`, a builder in `models/yolo.py`
whose `via` texts cite its line), every rule's examples, and real files of the installed torch
sources each with a rule example (`tests/real_code.py`). The edits are drawn at random (a fixed
seed) from those a user makes: a line at the top, a comment line anywhere, a statement inside a
function; and a helper added, which must fall back.
"""

import random
from pathlib import Path

import pytest

from tests import real_edits
from tests.real_code import real_texts
from tests.test_same_findings import _project
from torchnumlint import project_tables
from torchnumlint.index import FuncInfo, ProjectIndex, Site, index_file
from torchnumlint.moves import _paired, moved_index, moves


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """path -> text of every file of the project (each linted as written, never written back)."""
    root = _project(tmp_path_factory.mktemp("moves"))
    found = {str(path): path.read_text() for path in sorted(root.rglob("*.py"))}
    for number, (path, text) in enumerate(real_texts(40)):
        found[str(root / "torch_files" / f"f{number}_{Path(path).name}")] = text
    return found


def _edits(text, rng):
    """(what, edited text, whether it moves facts only) for one file."""
    for edit in real_edits.MOVES + real_edits.CHANGES:  # a statement in a function: a local may shadow a name
        yield edit.__name__, edit(text, rng), edit in real_edits.MOVES


def _merged(parts, order):
    index = ProjectIndex.empty()
    for path in order:
        index.absorb(parts[path], copy_classes=True)
    index.finalize()
    return index


def _finalized(index):
    """What `finalize` gives, and where each fact is now."""
    classes = [(c.path, c.name, c.line, c.kind, c.protected) for infos in index.classes.values() for c in infos]
    subclasses = {key: [(c.path, c.name, c.line, c.kind) for c in infos] for key, infos in index.subclasses.items()}
    return index.reached, index.fp16_sites(), classes, subclasses, list(index.functions), index.toplevel


def test_mapped_facts_are_a_fresh_finalize_after_random_real_edits(texts):
    rng = random.Random(22)
    paths = list(texts)
    parts = {path: index_file(path, text) for path, text in texts.items()}
    whole = _merged(parts, paths)
    tables = project_tables.make(paths, paths, parts, whole)
    assert whole.reached and any(site.via for site in whole.reached.values())  # a builder's reach is there to map
    chosen = [path for path in paths if "/models/" in path or path.endswith("train.py")] + rng.sample(paths, 30)
    mapped = fell_back = helpers = 0
    via_moved = False
    for path in chosen:
        before = parts[path]
        others = [other for other in paths if other != path]
        last = _merged(parts, others + [path])  # the server merges the buffer last
        for what, text, only_moves in _edits(texts[path], rng):
            if text is None:
                continue
            after = index_file(path, text)
            edited = {**parts, path: after}
            moved = moves(path, before, after)
            if only_moves:
                assert moved is not None, (what, path)
            if what == "helper_added" and any(func.name == "added_helper" for func in after.functions.values()):
                assert moved is None, path  # (a file the index's pre-filter skips has no functions)
                helpers += 1
            if moved is None:
                fell_back += 1
                continue
            mapped += 1
            fresh = _merged(edited, others + [path])
            patched = moved_index(last, before, after, path)
            assert patched is not None
            assert _finalized(patched) == _finalized(fresh), (what, path)
            fresh_tables = project_tables.make(paths, paths, edited, _merged(edited, paths))
            copy = project_tables.Tables(**{**vars(tables), "keys": list(tables.keys), "counts": tables.counts})
            new_keys = [other if other != path else path + "#edited" for other in paths]
            updated = project_tables.updated(copy, new_keys, {path: before}, {path: after})
            if updated is None:  # what a helper returns changed: the stored answers cannot hold
                assert project_tables.names_part(before.summaries.files.get(path)) != project_tables.names_part(
                    after.summaries.files.get(path)
                ), (what, path)
                continue
            assert (updated.reached, updated.sites, updated.kinds) == (fresh_tables.reached, fresh_tables.sites, fresh_tables.kinds)
            back = {new: old for old, new in moved.keys.items()}
            via_moved = via_moved or any(site.via != last.reached[back.get(key, key)].via for key, site in fresh.reached.items())
    assert mapped >= 80 and helpers >= 10 and fell_back >= helpers  # most edits map; every added helper falls back
    assert via_moved  # a builder's line moved, and the texts that cite it with it


def _two_regions(first: int, second: int) -> ProjectIndex:
    """A file's facts, written out: two autocast regions, at lines `first` and `second`, each
    calling the module-level `g`. (From code, an edit that swaps two regions also reorders the
    calls of the function holding them, which the comparison sees; the facts alone can differ in
    the regions' order by position only.)"""
    g = FuncInfo("m.py:1:g", "m.py", "g")
    part = ProjectIndex(functions={g.key: g}, toplevel={"g": [g.key]})
    for line in (first, second):
        part.regions.append((Site("m.py", line), FuncInfo(f"m.py:{line}:<autocast>", "m.py", "<autocast>", refs=[("call", "g", None)])))
    return part


def test_regions_that_swap_their_order_by_position_are_not_mapped():
    """The first region by position is the one that reaches `g` (what a finding cites): after
    the swap it is the other one, which a mapping of positions would not see."""
    before, after = _two_regions(5, 9), _two_regions(9, 5)
    assert [_merged({"m.py": part}, ["m.py"]).reached["m.py:1:g"].line for part in (before, after)] == [5, 5]
    assert moves("m.py", before, after) is None
    assert moves("m.py", before, _two_regions(6, 10)) is not None


def test_a_line_two_facts_share_is_mapped_only_while_they_share_one():
    assert _paired([5, 5, 6], [7, 7, 8]) == {5: 7, 6: 8}
    assert _paired([5, 5], [5, 6]) is None  # split onto two lines
    assert _paired([5, 6], [7, 7]) is None  # joined onto one
