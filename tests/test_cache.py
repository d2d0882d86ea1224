"""The cache: a valid entry is the result (nothing parsed), anything its value depends on
invalidates it, a torn entry reads as a miss, two runs at once leave only valid entries, and a
fully cached run never imports libcst."""

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_runner import FUNCTION, STEP
from torchnumlint import cache as caching
from torchnumlint import index, runner
from torchnumlint.config import Settings
from torchnumlint.runner import Options, run

BAD = "import torch.nn.functional as F\ny = F.kl_div(a, F.softmax(b, -1))\n"
ROOT = Path(__file__).resolve().parents[1]


def project(tmp_path, **files):
    (tmp_path / "setup.py").write_text("")
    for name, body in files.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body).lstrip())
    return tmp_path


def lint(folder, **options):
    return run([str(folder)], Settings(), options=Options(cache=True, **options))


@pytest.fixture
def linted(monkeypatch):
    """The paths `process_file` is called on (in this process: no workers)."""
    seen = []
    real = runner.process_file

    def process_file(source, *args):
        seen.append(Path(source.path).name)
        return real(source, *args)

    monkeypatch.setattr(runner, "process_file", process_file)
    return seen


def test_a_warm_run_parses_nothing_and_gives_the_same_result(tmp_path, linted):
    folder = project(tmp_path, a=BAD, b="import torch\nx = (\n", c="import os\n")
    cold = lint(folder)
    assert sorted(linted) == ["a.py", "b.py", "c.py", "setup.py"]
    linted.clear()
    warm = lint(folder)
    assert linted == []
    assert (warm.findings, warm.errors, warm.files) == (cold.findings, cold.errors, cold.files)
    assert cold.findings and cold.errors and (folder / caching.FOLDER_NAME / "CACHEDIR.TAG").is_file()


def test_content_settings_and_the_linters_code_invalidate(tmp_path, linted, monkeypatch):
    folder = project(tmp_path, a=BAD, b=BAD)
    lint(folder)
    (folder / "a.py").write_text(BAD + "z = 1\n")
    linted.clear()
    assert len(lint(folder).findings) == 4
    assert "a.py" in linted and "setup.py" not in linted  # b.py too, when it reads the project's facts
    linted.clear()
    lint(folder, strict=True)
    assert sorted(linted) == ["a.py", "b.py", "setup.py"]
    (folder / "pyproject.toml").write_text('[tool.torchnumlint]\nignore = ["TNL114"]\n')
    linted.clear()
    assert {f.code for f in lint(folder).findings} == {"TNL101"} and sorted(linted) == ["a.py", "b.py", "setup.py"]
    monkeypatch.setattr(caching, "package_fingerprint", lambda: "another version")
    linted.clear()
    lint(folder)
    assert sorted(linted) == ["a.py", "b.py", "setup.py"]


def test_a_change_to_the_project_facts_invalidates_the_files_that_read_them(tmp_path, linted):
    folder = project(tmp_path, ops=FUNCTION, train=STEP)
    assert [Path(f.path).name for f in lint(folder).findings] == ["ops.py"]  # train.py's region reaches it
    (folder / "train.py").write_text("import torch\nfrom ops import Energy\n\n\ndef step(x):\n    return Energy.apply(x)\n")
    linted.clear()
    assert lint(folder).findings == []  # ops.py is unchanged, but what reaches it is not
    assert "ops.py" in linted


def test_an_edit_that_leaves_a_files_facts_as_they_were_relints_that_file_alone(tmp_path, linted):
    folder = project(tmp_path, ops=FUNCTION, train=STEP)
    cold = lint(folder)
    (folder / "train.py").write_text((folder / "train.py").read_text() + "# a comment changes no fact\n")
    linted.clear()
    assert lint(folder).findings == cold.findings
    assert linted == ["train.py"]  # ops.py's entry holds: the facts it read are the same
    (folder / "train.py").write_text((folder / "train.py").read_text().replace('"cuda"', '"cuda", dtype=torch.bfloat16'))
    linted.clear()
    lint(folder)
    assert sorted(linted) == ["ops.py", "train.py"]  # the region that reaches ops.py changed


def test_pre_commit_on_one_file_reads_the_others_facts_from_the_cache(tmp_path, linted, monkeypatch):
    folder = project(tmp_path, ops=FUNCTION, train=STEP)
    lint(folder)
    parsed = []
    real = index.index_file
    monkeypatch.setattr(index, "index_file", lambda path, text: parsed.append(Path(path).name) or real(path, text))
    (folder / "ops.py").write_text(textwrap.dedent(FUNCTION).lstrip() + "\n")
    linted.clear()
    assert [f.line for f in run([str(folder / "ops.py")], Settings(), options=Options(cache=True)).findings] == [7]
    assert linted == ["ops.py"] and parsed == ["ops.py"]


def test_the_facts_of_a_project_are_one_file_that_a_torn_copy_of_only_costs_a_parse(tmp_path, monkeypatch):
    folder = project(tmp_path, ops=FUNCTION, train=STEP)
    lint(folder)
    pack = folder / caching.FOLDER_NAME / "facts.sqlite"
    assert pack.is_file() and not (folder / caching.FOLDER_NAME / "facts").exists()
    parsed = []
    real = index.index_file
    monkeypatch.setattr(index, "index_file", lambda path, text: parsed.append(Path(path).name) or real(path, text))
    (folder / "train.py").write_text((folder / "train.py").read_text() + "# changed\n")
    expected = [f.line for f in run([str(folder / "train.py")], Settings(), options=Options(cache=True)).findings]
    assert parsed == ["train.py"]  # ops.py's facts came from the pack
    pack.write_bytes(b"not a database" * 100)
    parsed.clear()
    (folder / "train.py").write_text((folder / "train.py").read_text() + "# again\n")
    assert [f.line for f in run([str(folder / "train.py")], Settings(), options=Options(cache=True)).findings] == expected
    assert sorted(parsed) == ["ops.py", "setup.py", "train.py"]  # a foreign pack is a miss, never an error


def test_fix_uses_an_entry_only_when_there_is_nothing_to_fix(tmp_path, linted):
    folder = project(tmp_path, a="import torch\nz = torch.log(torch.sigmoid(x))\n", b="import torch\n")
    lint(folder)
    linted.clear()
    result = lint(folder, fix=True)
    assert linted == ["a.py"] and result.fixed == 1
    assert "logsigmoid" in (folder / "a.py").read_text()


def entries(folder):
    """key -> record of each lint entry in the project's results pack."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(folder / caching.FOLDER_NAME / "lint.sqlite")) as connection:
        return dict(connection.execute("SELECT key, data FROM entries").fetchall())


def rewrite_entries(folder, change):
    """Each lint entry's record replaced by `change(number, record)`, in place in the pack."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(folder / caching.FOLDER_NAME / "lint.sqlite")) as connection, connection:
        for number, (key, data) in enumerate(sorted(entries(folder).items())):
            connection.execute("UPDATE entries SET data = ? WHERE key = ?", (change(number, data), key))


def test_a_torn_or_foreign_entry_reads_as_a_miss(tmp_path, linted):
    folder = project(tmp_path, a=BAD)
    cold = lint(folder)
    assert len(entries(folder)) == 2  # a.py and setup.py: the results of a project are one pack's rows
    rewrite_entries(folder, lambda number, data: data[: len(data) // 2] if number % 2 else data[:-1] + bytes([data[-1] ^ 1]))
    linted.clear()
    assert lint(folder).findings == cold.findings and sorted(linted) == ["a.py", "setup.py"]
    linted.clear()
    assert lint(folder).findings == cold.findings and linted == []  # stored whole again


def test_a_run_stopped_midway_keeps_the_entries_it_stored(tmp_path, monkeypatch, linted):
    folder = project(tmp_path, **{f"m{i}": BAD for i in range(5)})
    monkeypatch.setattr(runner._Project, "_BATCH", 2)
    real = runner.process_file
    count = []

    def stop_at_the_fifth(source, *args):
        count.append(source.path)
        if len(count) == 5:
            raise KeyboardInterrupt
        return real(source, *args)

    monkeypatch.setattr(runner, "process_file", stop_at_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        lint(folder)
    assert len(entries(folder)) == 4  # two batches of two, each its own transaction


def test_a_write_that_dies_before_its_rename_leaves_no_entry(tmp_path, monkeypatch):
    store = caching.Cache(str(tmp_path / "cache"))

    def crash(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(caching.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.put("lint", "ab" * 16, ["value"])
    monkeypatch.undo()
    assert store.get("lint", "ab" * 16) is None
    assert [p.name for p in (tmp_path / "cache" / "lint").rglob("*") if p.is_file()] == []


def test_two_runs_at_once_leave_only_valid_entries(tmp_path):
    folder = project(tmp_path, **{f"m{i}": BAD if i % 3 == 0 else "import torch\ny = x.sum()\n" for i in range(40)})
    command = [sys.executable, "-m", "torchnumlint", str(folder), "-j", "2"]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in runs]
    serial = subprocess.run(command + ["--no-cache"], capture_output=True, cwd=ROOT, timeout=600)
    assert outputs[0] == outputs[1] == (serial.stdout, serial.stderr)
    found = entries(folder)
    assert len(found) == 41 and all(caching.Cache.decode("lint", record) is not None for record in found.values())
    warm = subprocess.run(command, capture_output=True, cwd=ROOT, timeout=600)
    assert (warm.stdout, warm.stderr) == (serial.stdout, serial.stderr)


def test_a_fully_cached_run_does_not_import_libcst(tmp_path):
    folder = project(tmp_path, a=BAD, b="import torch\n")
    check = (
        "import sys, torchnumlint.cli as c\ntry:\n    c.main(sys.argv[1:])\nexcept SystemExit:\n    pass\nprint('libcst' in sys.modules)\n"
    )
    outputs = [subprocess.run([sys.executable, "-c", check, str(folder)], capture_output=True, text=True, cwd=ROOT) for _ in range(2)]
    assert outputs[0].stdout.splitlines()[-1] == "True"  # the cold run parsed
    assert outputs[1].stdout.splitlines()[-1] == "False"
    assert outputs[1].stdout.splitlines()[:-1] == outputs[0].stdout.splitlines()[:-1]


def test_no_cache_writes_nothing(tmp_path):
    folder = project(tmp_path, a=BAD)
    run([str(folder)], Settings(), options=Options())
    assert not (folder / caching.FOLDER_NAME).exists()
    lint(folder, cache_dir=str(tmp_path / "elsewhere"))
    assert not (folder / caching.FOLDER_NAME).exists() and (tmp_path / "elsewhere" / "lint.sqlite").is_file()


def test_one_file_after_an_edit_to_another_files_facts_gives_what_no_cache_gives(tmp_path):
    folder = project(tmp_path, ops=FUNCTION, train=STEP)
    lint(folder)
    (folder / "train.py").write_text((folder / "train.py").read_text().replace('"cuda"', '"cuda", dtype=torch.bfloat16'))
    (folder / "ops.py").write_text((folder / "ops.py").read_text() + "# staged\n")
    one = [str(folder / "ops.py")]
    cached = run(one, Settings(), options=Options(cache=True))
    fresh = run(one, Settings(), options=Options(cache=False))
    assert (cached.findings, cached.errors) == (fresh.findings, fresh.errors)
    assert fresh.findings == []  # a bfloat16 region does not overflow float16's range: the facts were read anew


def test_reading_the_facts_pack_leaves_the_collector_as_it_found_it(tmp_path):
    import gc

    store = caching.Cache(str(tmp_path / "cache"))
    facts = index.index_file("m.py", "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    store.put_many("facts", [("k", facts)])
    assert gc.isenabled()
    assert store.get_many("facts", ["k"]) == {"k": facts}
    assert gc.isenabled()
    gc.disable()
    try:
        assert store.get_many("facts", ["k"]) == {"k": facts}
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_projects_results_are_read_in_one_query_and_equal_records_decoded_once(tmp_path, monkeypatch):
    store = caching.Cache(str(tmp_path / "cache"))
    empty, found = (None, [], [], None), (None, [], ["m.py: cannot parse: x"], None)
    store.put_records("lint", [("a", caching.record_of(empty)), ("b", caching.record_of(empty)), ("c", caching.record_of(found))])
    store.put_records("lint", [("torn", caching.record_of(found)[:-1])])
    queries, decoded = [], []
    monkeypatch.setattr(caching.Cache, "records", lambda self, kind, keys: queries.append(keys) or real_records(self, kind, keys))
    monkeypatch.setattr(caching.Cache, "decode", staticmethod(lambda kind, data: decoded.append(data) or real_decode(kind, data)))
    rows = caching.Rows(store, "lint")
    rows.want(["a", "b", "c", "torn", "absent"])
    assert [rows.get(key) for key in ("a", "b", "c", "torn", "absent")] == [empty, empty, found, None, None]
    assert queries == [["a", "b", "c", "torn", "absent"]] and len(decoded) == 3  # a and b: one decode
    assert rows.get("later") is None and queries[-1] == ["later"]


real_records = caching.Cache.records
real_decode = caching.Cache.decode
