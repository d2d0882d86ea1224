"""The fuzz suite (issue 21): hostile inputs for a fixed budget of CPU time, deselected by default.

    python -m pytest -m fuzz tests/test_fuzz.py        # or .ci/fuzz, the optional CI step

`TNL_FUZZ_SECONDS` is the whole suite's budget (default 1200 s: 20 CPU-minutes, one process),
shared among the tests below by `SHARES`; `TNL_FUZZ_SEED` moves every generator to other inputs
(default 0: a run is reproducible; a failure names the seed and the case). Each test draws cases
until its share is spent, so a longer budget searches further, never differently. What must hold:

- random programs (hypothesmith) with rule examples spliced in: linting and fixing raise nothing
  but a ParseError, a fix keeps the program valid, and a second fix changes nothing;
- rule examples mutated byte by byte and token by token (NULs, undecodable bytes, BOMs, form
  feeds, CRLF, deep nesting, truncation): reading and linting give findings, a ParseError or a
  SourceError, never another exception, and a fix never breaks a program that parsed;
- cache entries corrupted at random (torn, flipped, re-signed JSON of the wrong shape): a run
  gives the clean run's result;
- the typed reader of cache entries, on random mutations of real project facts: a value or a
  Mismatch, nothing else;
- hostile file names (undecodable bytes, control characters, quotes, `%`): every report format
  writes strict UTF-8, SARIF validates against its schema, JUnit parses as XML.
"""

import ast
import contextlib
import hashlib
import json
import os
import random
import sqlite3
import time
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchnumlint import cache as caching
from torchnumlint import plaindata
from torchnumlint.config import Settings
from torchnumlint.engine import ParseError, lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.index import ProjectIndex, index_file
from torchnumlint.report import FORMATS
from torchnumlint.results import Options
from torchnumlint.rules.registry import registry
from torchnumlint.runner import run
from torchnumlint.source import SourceError, decode

pytestmark = pytest.mark.fuzz

BUDGET = float(os.environ.get("TNL_FUZZ_SECONDS", "1200"))
SEED = int(os.environ.get("TNL_FUZZ_SEED", "0"))
SHARES = {"programs": 0.35, "mutations": 0.3, "cache": 0.15, "entries": 0.05, "names": 0.15}
RULES = list(registry().values())
DEFAULT_RULES = [rule for rule in RULES if rule.default]
EXAMPLES = [example.bad for rule in RULES for example in rule.examples]
GOOD = [text for rule in RULES for text in rule.good]
SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "sarif-schema-2.1.0.json"


def _until(share: str):
    """Case numbers until the share of the budget is spent (at least one case)."""
    stop = time.process_time() + BUDGET * SHARES[share]
    case = 0
    while case == 0 or time.process_time() < stop:
        yield case
        case += 1


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPython's SyntaxWarnings about random programs
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _fix_holds(text: str, where: str) -> None:
    try:
        result = fix_text("p.py", text, RULES, unsafe=True)
    except ParseError:
        return
    if _parses(text):
        assert _parses(result.text), f"{where}: a fix broke the program:\n{result.text}"
    if result.text != text:
        again = fix_text("p.py", result.text, RULES, unsafe=True)
        assert again.text == result.text, f"{where}: a second fix changed the text:\n{result.text}"


def test_random_programs_with_rule_examples_fix_to_a_valid_fixed_point():
    hypothesis = pytest.importorskip("hypothesis")
    hypothesmith = pytest.importorskip("hypothesmith")
    from hypothesis import strategies as st

    parts = st.lists(st.one_of(st.sampled_from(EXAMPLES + GOOD), hypothesmith.from_grammar()), min_size=1, max_size=5)

    @hypothesis.settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(parts)
    def check(pieces):
        text = "\n\n".join(piece if piece.endswith("\n") else piece + "\n" for piece in pieces)
        if _parses(text):
            _fix_holds(text, "a random program")

    for case in _until("programs"):
        hypothesis.seed(SEED * 1_000_003 + case)(check)()


_SPLICES = [
    "not " * 400 + "x",
    "(" * 150 + "x" + ")" * 150,
    "\x00",
    "\x0c",
    "\t",
    "\\\n",
    "'''",
    "#",
    "lambda: ",
    "torch.log(torch.softmax(x, -1))",
    "x / x.norm(dim=-1, keepdim=True)",
    " if c else ",
    "async ",
    "@torch.no_grad()\n",
    "with torch.autocast('cuda'):\n    ",
    "é",
    "\u2028",
    "\U0001f600",
    ";",
    ":",
    "\n",
]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(data))
        kind = rng.randrange(8)
        if kind == 0:
            data = data[:at] + data[at + rng.randint(1, 20) :]
        elif kind == 1:
            data = data[:at] + rng.choice(_SPLICES).encode("utf-8") + data[at:]
        elif kind == 2:
            data = data[:at] + bytes([rng.randrange(256)]) + data[at:]
        elif kind == 3:
            data = data.replace(b"\n", b"\r\n")
        elif kind == 4:
            data = b"\xef\xbb\xbf" + data
        elif kind == 5:
            data = data[:at]
        elif kind == 6:
            lines = data.splitlines(keepends=True)
            rng.shuffle(lines)
            data = b"".join(lines)
        else:
            data = b"# -*- coding: latin-1 -*-\n" + data
    return data


def test_mutated_sources_read_and_lint_to_a_clear_answer():
    rng = random.Random(SEED)
    corpus = [text.encode("utf-8") for text in EXAMPLES + GOOD]
    for case in _until("mutations"):
        data = _mutate(rng, rng.choice(corpus))
        where = f"mutation case {case} (seed {SEED}): {data[:200]!r}"
        try:
            source = decode("p.py", data)
        except SourceError:
            continue
        try:
            lint_text("p.py", source.text, DEFAULT_RULES, strict=bool(case % 2))
        except ParseError:
            continue
        _fix_holds(source.text, where)


BAD = "import torch\nimport torch.nn.functional as F\ny = F.kl_div(a, F.softmax(b, -1))\n"
MODULE = """import torch


class Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.exp(x * x).sum(-1, keepdim=True) / 1e-8


class Net(torch.nn.Module):
    def forward(self, x):
        with torch.autocast("cuda"):
            return torch.softmax(Energy.apply(x), -1)


def probs(z):
    return torch.softmax(z, -1)
"""


def _entry(payload: bytes) -> bytes:
    return caching._HEADER.pack(caching._MAGIC, len(payload), hashlib.blake2b(payload, digest_size=16).digest()) + payload


def _json_mutation(rng: random.Random, tree):
    """`tree` with one value somewhere replaced by another of a random JSON kind."""
    if isinstance(tree, list) and tree and rng.random() < 0.8:
        at = rng.randrange(len(tree))
        return tree[:at] + [_json_mutation(rng, tree[at])] + tree[at + 1 :]
    return rng.choice([None, True, 0, -1, 1.5, "", "Finding", "x", [], [None], {"a": 1}, [tree], 2**70])


def _entries(folder: Path) -> dict:
    """(file, key) -> record of every cache entry: each entry file (key "") and each row of each
    SQLite pack (the lint results, the facts, ...)."""
    found = {}
    for path in folder.rglob("*"):
        if path.suffix == ".sqlite":
            with contextlib.closing(sqlite3.connect(path)) as connection:
                found.update(((path, key), bytes(data)) for key, data in connection.execute("SELECT key, data FROM entries"))
        elif path.is_file() and path.name not in ("CACHEDIR.TAG", ".gitignore") and "journal" not in path.name:
            found[path, ""] = path.read_bytes()
    return found


def _write_entries(records: dict) -> None:
    for (path, key), data in records.items():
        if not key:
            path.write_bytes(data)
            continue
        with contextlib.closing(sqlite3.connect(path)) as connection, connection:
            connection.execute("UPDATE entries SET data = ? WHERE key = ?", (data, key))


def test_corrupted_cache_entries_give_the_clean_result(tmp_path):
    """Torn and flipped entries fail their checksum: the clean result. A re-signed entry of the
    wrong shape is the typed reader's to refuse: no crash, no internal error (one of the right
    shape but other values is a valid entry, whatever it says)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "setup.py").write_text("")
    (project / "a.py").write_text(BAD)
    (project / "ops.py").write_text(MODULE)
    (project / "train.py").write_text("import torch\nfrom ops import probs\n\n\ndef f(x):\n    return torch.log(probs(x))\n")
    clean = run([str(project)], Settings(), options=Options(cache=False))
    expected = (clean.findings, clean.errors)
    folder = project / caching.FOLDER_NAME
    warm = run([str(project)], Settings(), options=Options(cache=True))
    assert (warm.findings, warm.errors) == expected
    pristine = _entries(folder)
    assert {where[0].name for where in pristine} >= {"lint.sqlite", "facts.sqlite"}
    rng = random.Random(SEED)
    for case in _until("cache"):
        _write_entries(pristine)
        resigned = False
        changed = {}
        for where in rng.sample(sorted(pristine), k=rng.randint(1, len(pristine))):
            data = pristine[where]
            kind = rng.randrange(3)
            if kind == 0:
                changed[where] = data[: rng.randrange(len(data))]
            elif kind == 1:
                at = rng.randrange(len(data))
                changed[where] = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
            else:
                resigned = True
                tree = json.loads(data[caching._HEADER.size :])
                changed[where] = _entry(json.dumps(_json_mutation(rng, tree)).encode("utf-8"))
        _write_entries(changed)
        result = run([str(project)], Settings(), options=Options(cache=True))
        where = f"cache case {case} (seed {SEED})"
        assert not any("internal error" in error for error in result.errors), where
        if not resigned:
            assert (result.findings, result.errors) == expected, where


def test_the_typed_reader_gives_a_value_or_a_mismatch():
    trees = [json.loads(plaindata.dumps(index_file(name, text))) for name, text in (("ops.py", MODULE), ("a.py", BAD))]
    rng = random.Random(SEED)
    for case in _until("entries"):
        mutated = json.dumps(_json_mutation(rng, rng.choice(trees))).encode("utf-8")
        try:
            plaindata.loads(mutated, ProjectIndex)
        except plaindata.Mismatch:
            pass


_NAME_BYTES = [
    b"\xff",
    b"\xe9",
    b"\x01",
    b"\x1b[31m",
    b"\t",
    b"\n",
    b"%",
    b"%25",
    b"'",
    b'"',
    b"<",
    b"&",
    b" ",
    b",",
    b":",
    b"\xc3\xa9",
    b"\xf0\x9f\x98\x80",
    b"#",
    b"?",
    b"\r",
]


def test_hostile_file_names_in_every_report_format(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))) if SCHEMA.is_file() else None
    rng = random.Random(SEED)
    folder = os.fsencode(tmp_path)
    for case in _until("names"):
        work = os.path.join(folder, b"case%d" % case)
        os.mkdir(work)
        for number in range(3):
            name = b"".join(rng.choice(_NAME_BYTES) for _ in range(rng.randint(1, 4))) + b"%d.py" % number
            with open(os.path.join(work, name), "wb") as handle:
                handle.write(rng.choice([BAD, "import torch\nx = (\n", MODULE]).encode("utf-8"))
        result = run([os.fsdecode(work)], Settings(), options=Options(cache=False))
        for fmt, render in FORMATS.items():
            out = render(result, Options())
            where = f"names case {case} (seed {SEED}), {fmt}"
            if fmt in ("text", "concise"):
                continue  # for a terminal: the names' own bytes
            out.encode("utf-8")  # strict
            if fmt == "sarif" and validator is not None:
                validator.validate(json.loads(out))
            elif fmt == "junit":
                ET.fromstring(out.encode("utf-8"))
            elif fmt in ("json", "gitlab"):
                assert isinstance(json.loads(out), list), where
