"""A one-file run reads the project's stored tables (`project_tables.py`) and decodes only the
facts its lint asks for: its findings are those of `--no-cache` after any edit (to the linted
file, to another file's facts, a file deleted or added, an fp16 region moved, the paths given
absolute or relative), and the lazy index answers every question as the whole index does."""

import os
import random
import shutil
import textwrap
from pathlib import Path

import pytest

from tests import real_edits
from tests.real_code import real_texts
from tests.test_runner import FUNCTION, STEP
from tests.test_same_findings import _project
from torchnumlint import project_tables, runner
from torchnumlint.config import Settings
from torchnumlint.index import ProjectIndex, index_file
from torchnumlint.runner import Options, run

HEADS = """
    import torch


    def probs(z):
        return torch.softmax(z, -1)


    class Head(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)
"""

USE = """
    import torch
    import torch.nn.functional as F
    from heads import probs, Head


    def loss(z, y):
        head = Head()
        return torch.log(probs(z)), F.binary_cross_entropy(head(z), y)
"""


def _write(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body).lstrip())


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A project whose files read each other's facts (an fp16 region reaching a Function of
    another file, helpers returning a softmax and a sigmoid), linted whole once with the cache,
    then one file of it; the working folder is its root, as for pre-commit."""
    (tmp_path / "setup.py").write_text("")
    for name, body in (("ops", FUNCTION), ("train", STEP), ("heads", HEADS), ("use", USE)):
        _write(tmp_path, name, body)
    monkeypatch.chdir(tmp_path)
    run(["."], Settings(), options=Options(cache=True))
    _append(tmp_path / "use.py", "# edited\n")
    run(["use.py"], Settings(), options=Options(cache=True))  # a run over part of the project stores the tables
    return tmp_path


@pytest.fixture
def whole(monkeypatch):
    """How many times a run decoded and merged every file's facts (`_whole_index`)."""
    built = []
    real = runner._Project._whole_index

    def counted(self):
        built.append(1)
        return real(self)

    monkeypatch.setattr(runner._Project, "_whole_index", counted)
    return built


def _answer(result):
    return [(f.path, f.line, f.col, f.code, f.message) for f in result.findings], result.errors


def _same_as_no_cache(paths):
    cached = run(paths, Settings(), options=Options(cache=True))
    fresh = run(paths, Settings(), options=Options(cache=False))
    assert _answer(cached) == _answer(fresh)
    return _answer(fresh)[0]


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_an_edit_that_keeps_the_facts_reads_the_tables_alone(folder, whole):
    for name in ("use", "ops", "train"):
        _append(folder / f"{name}.py", "\n# staged\n")
        whole.clear()
        found = _same_as_no_cache([f"{name}.py"])
        assert whole == [1]  # the run without the cache builds the whole index; the cached one does not
        assert bool(found) == (name != "train")  # use.py's and ops.py's findings read other files' facts


def test_an_edit_to_another_files_facts(folder, whole):
    before = _same_as_no_cache(["use.py"])
    _write(folder, "heads", HEADS.replace("torch.softmax(z, -1)", "z.relu()"))  # probs gives no softmax now
    _append(folder / "use.py", "# staged\n")
    after = _same_as_no_cache(["use.py"])
    assert len(after) == len(before) - 1
    (folder / "train.py").write_text((folder / "train.py").read_text().replace('"cuda"', '"cuda", dtype=torch.bfloat16'))
    _append(folder / "ops.py", "# staged\n")
    assert _same_as_no_cache(["ops.py"]) == []  # a bfloat16 region does not overflow float16's range


def test_a_deleted_and_an_added_file(folder):
    (folder / "heads.py").unlink()
    _append(folder / "use.py", "# staged\n")
    _same_as_no_cache(["use.py"])
    _write(folder, "heads", HEADS)
    _write(folder, "more", "import torch\n\n\ndef more_probs(z):\n    return torch.softmax(z, 0)\n")
    other = "\n\ndef other(z):\n    return torch.log(more_probs(z))\n"
    (folder / "use.py").write_text("from more import more_probs\n" + textwrap.dedent(USE).lstrip() + other)
    assert len(_same_as_no_cache(["use.py"])) == 3


def test_a_region_that_moves_what_it_reaches(folder):
    _write(
        folder,
        "train",
        STEP.replace("return Energy.apply(x)", "return x * 2").replace("def step(x):", "def step(x):\n    y = Energy.apply(x)"),
    )
    _append(folder / "ops.py", "# staged\n")
    assert _same_as_no_cache(["ops.py"]) == []  # the region no longer calls the Function
    _write(folder, "train", STEP)
    _append(folder / "ops.py", "# again\n")
    assert _same_as_no_cache(["ops.py"]) != []


def test_absolute_and_relative_paths(folder):
    for paths in (["use.py"], [str(folder / "use.py")], ["./use.py"], [str(folder / "use.py")], ["use.py"]):
        _append(folder / "use.py", "# staged\n")
        found = _same_as_no_cache(paths)
        assert found and all(f[0] == paths[0] for f in found)


@pytest.mark.parametrize("stored", [False, True], ids=["made", "stored"])
def test_the_lazy_index_answers_as_the_whole_index(tmp_path, stored):
    """Every question a rule asks, over a project of every rule's examples and a YOLO-like model;
    with the tables as made, and as read back from the pack (their seldom-read fields decoded
    only when asked: `project_tables.loads`)."""
    root = _project(tmp_path)
    paths = sorted(str(path) for path in root.rglob("*.py"))
    parts = {path: index_file(path, Path(path).read_text()) for path in paths}
    whole = ProjectIndex.empty()
    for path in paths:
        whole.absorb(parts[path])
    whole.finalize()
    tables = project_tables.make(paths, paths, parts, whole)
    if stored:
        made = tables
        tables = project_tables.loads(project_tables.dumps(made))
        assert {"members", "children", "classes"}.isdisjoint(vars(tables))  # not decoded yet
        assert tables == made  # (every field read, so decoded, and equal)
        tables = project_tables.loads(project_tables.dumps(made))
    fresh = {path: index_file(path, Path(path).read_text()) for path in paths}  # not finalized: the tables' kinds are applied
    lazy = project_tables.LazyIndex(tables, lambda wanted: {path: fresh[path] for path in wanted}, lambda: whole)
    assert whole.classes and whole.reached and whole.summaries.producer_names()
    for name, infos in whole.classes.items():
        for path in {info.path for info in infos} | {paths[0]}:
            assert lazy.lookup(name, None, path) == whole.lookup(name, None, path)
            if lazy.lookup(name, None, path) is not None:
                assert lazy.lookup(name, None, path).kind == whole.lookup(name, None, path).kind
    for name in list(whole.toplevel) + list(whole.aliases):
        assert lazy.function(name, None, paths[0]) == whole.function(name, None, paths[0])
        assert lazy.lookup(name, None, paths[0]) == whole.lookup(name, None, paths[0])
    assert (lazy.fp16_sites(), lazy.has_scaler(), dict(lazy.reached)) == (whole.fp16_sites(), whole.has_scaler(), whole.reached)
    mine, theirs = lazy.summaries, whole.summaries
    assert mine.producer_names() == theirs.producer_names()
    kinds = [frozenset({"softmax"}), frozenset({"sigmoid"}), frozenset({"softmax", "sigmoid"}), frozenset({"norm"})]
    for one in kinds:
        names = theirs.producer_names()
        assert mine.producers_among(names, one) == theirs.producers_among(names, one)
    for path, summary in theirs.files.items():
        for cls_name, info in summary.classes.items() if summary is not None else ():
            for member in (*info.methods, *info.attrs, "forward"):
                assert mine._overridden((path, cls_name), member) == theirs._overridden((path, cls_name), member)
                assert mine._member_kind((path, cls_name), member, 0) == theirs._member_kind((path, cls_name), member, 0)
            for name in info.methods:
                assert mine.callers(path, cls_name, name) == theirs.callers(path, cls_name, name)
        for name in summary.functions if summary is not None else ():
            assert mine.callers(path, None, name) == theirs.callers(path, None, name)
            assert mine.callee_kind(path, None, ("name", name)) == theirs.callee_kind(path, None, ("name", name))
    own = paths[len(paths) // 2]
    frame = mine.with_file(own, theirs.files[own])
    assert frame.producer_names() == theirs.with_file(own, theirs.files[own]).producer_names()


def test_tables_that_cannot_be_updated_give_way_to_the_whole_index(folder, whole):
    """An edit that only moves the lines of a class or function is mapped onto the stored tables
    (`moves.py`); one that adds a class changes what `finalize` gives: the stored tables are not
    used, the whole index is built (and its tables stored)."""
    (folder / "heads.py").write_text("\n\n" + textwrap.dedent(HEADS).lstrip())
    _append(folder / "use.py", "# staged\n")
    whole.clear()
    run(["use.py"], Settings(), options=Options(cache=True))
    assert whole == []
    _append(folder / "heads.py", "\n\nclass Late(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    _append(folder / "use.py", "# again\n")
    whole.clear()
    run(["use.py"], Settings(), options=Options(cache=True))
    assert whole == [1]
    _append(folder / "use.py", "# and again\n")
    whole.clear()
    run(["use.py"], Settings(), options=Options(cache=True))
    assert whole == []  # the tables stored by the run before hold
    assert os.path.isfile(folder / ".torchnumlint_cache" / "tables.sqlite")
    shutil.rmtree(folder / ".torchnumlint_cache")


def test_random_real_edits_keep_the_tables_and_the_findings(tmp_path, monkeypatch, whole):
    """A sequence of edits drawn at random on the YOLO-like model (its builder's line is cited by
    the findings of the modules it reaches) and real torch files: after each, a one-file run
    with the cache (over the edited file and the model's modules) gives the findings of
    `--no-cache`; an edit that moves lines only is mapped onto the stored tables (the run reads
    them, and builds no whole index), one that adds a helper or a file, or deletes one, may not be."""
    root = _project(tmp_path)
    (root / "torch_files").mkdir()
    for number, (path, text) in enumerate(real_texts(12)):
        (root / "torch_files" / f"f{number}_{Path(path).name}").write_text(text)
    monkeypatch.chdir(root)
    strict = Options(cache=True, strict=True)
    run(["."], Settings(), options=strict)
    lazy = []
    real = runner._Project._lazy_index
    monkeypatch.setattr(runner._Project, "_lazy_index", lambda self: lazy.append(real(self)) or lazy[-1])
    rng = random.Random(22)
    files = ["models/yolo.py", "train.py", "models/common.py"] + [f"torch_files/{p.name}" for p in sorted((root / "torch_files").iterdir())]
    pending = True  # a change since the stored tables that they may not hold (none are stored yet)
    mapped = cross_file = 0
    for step in range(24):
        name = files[step % 3] if step % 2 == 0 else rng.choice(files)
        edit = rng.choice(real_edits.MOVES) if step % 4 else rng.choice(real_edits.CHANGES)
        text = edit(Path(name).read_text(), rng)
        if step in (9, 17):  # a file added, then deleted
            edit, name, text = real_edits.helper_added, "models/added.py", ""
            if step == 9:
                (root / name).write_text("import torch\nfrom torch import nn\n" + real_edits.MODULE)
            else:
                (root / name).unlink()
        elif text is None:
            continue
        else:
            Path(name).write_text(text)
        whole.clear()
        lazy.clear()
        paths = ["models/common.py"] + ([name] if name != "models/common.py" and os.path.exists(name) else [])
        cached = run(paths, Settings(), options=strict)
        built = len(whole)
        fresh = run(paths, Settings(), options=Options(cache=False, strict=True))
        assert _answer(cached) == _answer(fresh), (step, edit, name)
        if edit in real_edits.MOVES and not pending and lazy:
            assert lazy[-1] is not None and built == 0, (step, edit, name)
            mapped += 1
        pending = not built and (pending or edit not in real_edits.MOVES)  # a whole index stores new tables
        cross_file += sum("models/yolo.py:" in f.message for f in fresh.findings)
    assert mapped >= 6 and cross_file >= 24  # the builder's line is cited after every step


def test_a_tables_row_of_another_shape_is_a_miss():
    """The tables' payload is sections (`project_tables.dumps`): a row that is not one of them (the
    plain encoding, a cut payload, lengths that do not add up, not JSON) reads as a miss."""
    from torchnumlint import cache as caching, plaindata

    made = project_tables.Tables(paths=["a.py"], keys=["k"], classes={"Net": [0]}, kinds=[[("module", False)]])
    assert caching.Cache.decode("tables", caching._record(project_tables.dumps(made))) == made
    payload = project_tables.dumps(made)
    for wrong in (plaindata.dumps(made), payload[:-1], b"[1, 2]\n{}", b"not json\n" + payload):
        assert caching.Cache.decode("tables", caching._record(wrong)) is None
