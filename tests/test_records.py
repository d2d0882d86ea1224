"""The start path's plain-data classes (`record.Record`: no `dataclasses`, issue 22 item 5) keep a
dataclass's behaviour: equality of the same class by its compared fields, `replace`, the cache's
round trip (which builds them positionally, in `_fields` order) and pickling to workers."""

import inspect
import pickle

import pytest

from torchnumlint import plaindata
from torchnumlint.config import Config
from torchnumlint.findings import Edit, Finding, Fix, Safety
from torchnumlint.notebook import NotebookSource
from torchnumlint.record import Record
from torchnumlint.results import FileOutcome, Options, RunResult
from torchnumlint.sourcefile import SourceFile

FIX = Fix((Edit(0, 3, "new", (1, 0), (1, 3)),), Safety.SAFE)
FINDING = Finding("TNL101", "name", "message", "a.py", 1, 0, 1, 3, FIX, noqa_lines=(1,), cell=None)
RECORDS = [
    FINDING,
    SourceFile("a.py", b"x", "x", "utf-8", False),
    NotebookSource("a.ipynb", b"{}", "x", "utf-8", False, document="{}"),
    Options(fix=True, jobs=2),
    FileOutcome(findings=[FINDING], errors=["e"], fixed=1),
    RunResult(findings=[FINDING], found=1, files=1),
    Config(select=["TNL1"], max_file_size=5),
]


def _every_record_class(kind=Record):
    for sub in kind.__subclasses__():
        yield sub
        yield from _every_record_class(sub)


@pytest.mark.parametrize("kind", sorted(_every_record_class(), key=lambda kind: kind.__name__), ids=lambda kind: kind.__name__)
def test_each_constructor_takes_the_fields_in_their_order(kind):
    assert list(inspect.signature(kind.__init__).parameters)[1:] == list(kind._fields)


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: type(record).__name__)
def test_a_record_compares_replaces_and_pickles_as_a_dataclass_did(record):
    assert record == record.replace() and record is not record.replace()
    assert pickle.loads(pickle.dumps(record)) == record
    first = record._fields[0]
    changed = record.replace(**{first: "other"})
    assert changed != record and getattr(changed, first) == "other"
    assert repr(record).startswith(type(record).__name__ + "(")
    assert record != tuple(getattr(record, name) for name in record._fields)


def test_a_finding_ignores_its_noqa_lines_in_equality_and_repr():
    moved = FINDING.replace(noqa_lines=(7,))
    assert moved == FINDING and "noqa_lines" not in repr(FINDING)
    assert FINDING.replace(line=2) != FINDING


def test_records_round_trip_through_the_cache_encoding():
    for record in [FINDING, FileOutcome(findings=[FINDING], fixed=1, fixed_codes=[("TNL101", "name")])]:
        kind = type(record)
        assert plaindata.loads(plaindata.dumps(record), kind) == record
