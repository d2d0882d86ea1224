"""The cache holds plain data only: a planted entry never runs code, and an entry of the wrong
shape is a miss, through the installed command as a user runs it (issue 21, item 3)."""

import contextlib
import hashlib
import math
import pickle
import sqlite3
from typing import Dict

import pytest

from tests.test_cli import run
from torchnumlint import cache as caching
from torchnumlint import plaindata
from torchnumlint.findings import Edit, Finding, Fix, Safety
from torchnumlint.index import ProjectIndex, index_file

BAD = "import torch\nimport torch.nn.functional as F\ny = F.kl_div(a, F.softmax(b, -1))\n"
MODULE = """import torch
from torch.cuda.amp import autocast


class Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        return torch.exp(x * x).sum(-1, keepdim=True) / 1e-8


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-6
        self.act = torch.nn.Softmax(dim=-1)

    def forward(self, x):
        with autocast():
            return self.act(Energy.apply(x)) + self.eps


def probs(z):
    return torch.softmax(z, -1)
"""


class _Planted:
    """Unpickling this runs `open(path, "w")`: the proof that a pickle was loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _entry(payload: bytes) -> bytes:
    return caching._HEADER.pack(caching._MAGIC, len(payload), hashlib.blake2b(payload, digest_size=16).digest()) + payload


def _cache_files(folder):
    return [p for p in (folder / caching.FOLDER_NAME).rglob("*") if p.is_file() and p.parent != folder / caching.FOLDER_NAME]


def _pack_rows(folder):
    """(pack, key) of every row of the cache's packs (lint results, facts, ...)."""
    rows = []
    for pack in (folder / caching.FOLDER_NAME).glob("*.sqlite"):
        with contextlib.closing(sqlite3.connect(pack)) as connection:
            rows += [(pack, key) for (key,) in connection.execute("SELECT key FROM entries")]
    return rows


def _plant(folder, record):
    """`record` in place of every entry: each entry file and each row of each pack."""
    for path in _cache_files(folder):
        path.write_bytes(record)
    for pack, key in _pack_rows(folder):
        with contextlib.closing(sqlite3.connect(pack)) as connection, connection:
            connection.execute("UPDATE entries SET data = ? WHERE key = ?", (record, key))


@pytest.fixture
def linted_once(tmp_path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "ops.py").write_text(MODULE)
    cold = run(".", cwd=tmp_path)
    assert cold.returncode == 1 and "TNL101" in cold.stdout, cold.stderr
    assert {pack.name for pack, _ in _pack_rows(tmp_path)} >= {"lint.sqlite", "facts.sqlite"}
    return tmp_path, cold


def test_a_planted_pickle_in_every_entry_never_runs_and_reads_as_a_miss(linted_once):
    folder, cold = linted_once
    marker = folder / "ran"
    _plant(folder, _entry(pickle.dumps(_Planted(str(marker)))))
    warm = run(".", cwd=folder)
    assert not marker.exists()
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout), warm.stderr
    assert run(".", cwd=folder).stdout == cold.stdout  # the entries written again are good ones


@pytest.mark.parametrize("payload", [b'["x"]', b"[null, 3, []]", b'{"a": 1}', b"[" * 100000, b"\xff\xfe"])
def test_a_well_formed_entry_of_the_wrong_shape_is_a_miss_not_a_crash(linted_once, payload):
    folder, cold = linted_once
    _plant(folder, _entry(payload))
    warm = run(".", cwd=folder)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_finding_with_a_fix_survives_the_round_trip():
    finding = Finding(
        "TNL103", "log-of-softmax", "m", "p\udcff.py", 3, 4, 3, 9, Fix((Edit(1, 2, "x", (1, 1), (1, 2)),), Safety.UNSAFE), (3, 4), cell=2
    )
    entry = (None, [finding], ["p.py: a warning"], None)
    assert plaindata.loads(plaindata.dumps(entry), caching.entry_type("lint")) == entry
    asked = [(("lookup", "Model", None, "p.py"), "00ff"), (("callee_kind", "", "p.py", ("p.py", "Net"), ("name", "f"), 0, None), "11")]
    asked += [(("producers", "", (("log_softmax", "softmax"),), "0a0b0c0d"), "22")]
    entry = ("fingerprint", [finding], [], caching.reads_text(asked))
    assert plaindata.loads(plaindata.dumps(entry), caching.entry_type("lint")) == entry
    assert caching.reads_of(entry[3]) == asked  # the questions, kept as their own text, read only when asked
    assert caching.reads_of('[["x"]]') is None and caching.reads_of("[") is None  # not of their type: a miss


def test_project_facts_survive_the_round_trip():
    facts = index_file("ops.py", MODULE)
    assert facts.classes and facts.regions and facts.summaries.files["ops.py"] is not None
    again = plaindata.loads(plaindata.dumps(facts), ProjectIndex)
    assert again == facts and again.summaries.files == facts.summaries.files


def test_numbers_keep_their_values():
    table = {"inf": -math.inf, "tiny": 5e-324, "one": 1.0, "nan": math.nan}
    again = plaindata.loads(plaindata.dumps(table), Dict[str, float])
    assert math.isnan(again.pop("nan")) and again == {"inf": -math.inf, "tiny": 5e-324, "one": 1.0}


@pytest.mark.parametrize(
    "tree",
    [
        '["Finding"]',  # too few fields
        '[null, [["Edit", 1, 2, "x", [1, 1], [1, 2]]], []]',  # an Edit where a Finding goes
        '[null, [["Finding", "a", "b", "c", "d", 1, 2, 3, "4", null, [], null]], []]',  # a string for a column
        '[null, [["Finding", "a", "b", "c", "d", 1, 2, 3, 4, ["Fix", [], "dangerous"], [], null]], []]',  # no such safety
        "[true, [], []]",  # a boolean for the fingerprint
    ],
)
def test_a_wrong_shape_is_a_mismatch(tree):
    with pytest.raises(plaindata.Mismatch):
        plaindata.loads(tree.encode(), caching.entry_type("lint"))
