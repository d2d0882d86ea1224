"""A run whose one item is a light file (pre-commit: the changed file's facts, then its lint) runs
it in this process instead of a forked worker (`workers.run_all`'s `alone_up_to`, `runner.ALONE`).

What must not change: the findings, fixes and errors, which are those of the workers and of a run
without the cache, on every rule's examples and a YOLO-like project (`test_same_findings._project`:
helpers, fp16 regions and callers across files), edited at random; and the guarantees the
workers give: an exception is that file's one-line error, a file that runs past the time limit
is that file's error, and a caller's file too deeply nested for LibCST's parser (which a worker
survives and this process would not) sends the file to a worker, with the same findings.
"""

import random
import textwrap
import time
from pathlib import Path

import pytest

from tests.rules.test_callers import KL_HELPER, _train
from tests.test_jobs import _crash_on
from tests.test_same_findings import _project
from torchnumlint import runner, workers
from torchnumlint.config import Settings
from torchnumlint.rules import callers
from torchnumlint.runner import Options, run

pytestmark = pytest.mark.skipif(not workers.can_fork(), reason="the other path forks workers")


@pytest.fixture
def forks(monkeypatch):
    """The workers forked since (a list that grows by one per worker)."""
    started = []
    real = workers._Worker.__init__

    def counted(self, function):
        started.append(1)
        real(self, function)

    monkeypatch.setattr(workers._Worker, "__init__", counted)
    return started


def _answer(result):
    """Everything a run reports: findings with their fixes, errors, diffs."""
    return (
        [(f.path, f.line, f.col, f.end_line, f.end_col, f.code, f.message, f.fix, f.noqa_lines) for f in result.findings],
        result.errors,
        result.diffs,
    )


def _one_file(path: Path, **options) -> tuple:
    return _answer(run([str(path)], Settings(), options=Options(**options)))


def test_a_lone_file_gives_what_the_workers_and_a_run_without_the_cache_give(tmp_path, forks, monkeypatch):
    root = _project(tmp_path)
    cache = str(tmp_path / "cache")
    run([str(root)], Settings(), options=Options(cache=True, cache_dir=cache, jobs=2))  # every file's facts, as pre-commit finds them
    files = sorted(root.rglob("*.py"))
    picked = random.Random(2207).sample(files, 12)
    found = 0
    for turn, path in enumerate(picked):
        for edit in range(2):  # each run meets a changed file, as pre-commit does
            with path.open("a") as handle:
                handle.write(f"\n# edited {turn} {edit}\n")
            expected = _one_file(path, cache=False)  # the whole index, from scratch, no worker
            callers._parsed.cache_clear()  # (callers' files this process parsed are not parsed again)
            del forks[:]
            if edit == 0:
                here = _one_file(path, cache=True, cache_dir=cache, jobs=2)
                assert not forks  # both items (its facts, its lint) ran here
            else:
                with monkeypatch.context() as patched:
                    patched.setattr(runner, "ALONE", -1)  # no file is light enough: the workers run both
                    here = _one_file(path, cache=True, cache_dir=cache, jobs=2)
                assert forks
            assert here == expected
            found += len(expected[0])
        # a fix shown as a diff, here and from scratch
        assert _one_file(path, diff=True, jobs=2) == _one_file(path, diff=True)
    assert found >= 10  # the sample holds findings to compare


@pytest.fixture
def lone(tmp_path):
    """A file of no project: its project is itself, so its facts and its lint are one item each."""
    (tmp_path / "b.py").write_text("import torch\nimport torch.nn.functional as F\ny = F.kl_div(a, F.softmax(b, -1))\n")
    return tmp_path / "b.py"


def test_an_exception_in_a_lone_file_is_that_files_error(lone, forks, monkeypatch):
    def fail():
        raise MemoryError("out of memory")

    monkeypatch.setattr(runner, "process_file", _crash_on("b.py", fail))
    result = run([str(lone)], Settings(), options=Options(jobs=2))
    assert result.errors == [f"{lone}: internal error in torchnumlint (please report it): MemoryError: out of memory"]
    assert result.findings == [] and not forks


def test_a_lone_file_past_the_time_limit_is_that_files_error(lone, forks, monkeypatch):
    slept = []

    def hang():
        time.sleep(600)
        slept.append(True)  # reached only if the alarm did not stop the sleep

    monkeypatch.setattr(runner, "process_file", _crash_on("b.py", hang))
    result = run([str(lone)], Settings(), options=Options(jobs=2, timeout=2))
    assert result.errors == [f"{lone}: gave up after 2 s (the time limit per file)"]
    assert slept == [] and not forks  # stopped inside the sleep, in this process
    assert workers._can_time_here()  # the alarm is off again, its handler the default


def test_a_caller_too_deep_for_libcst_sends_the_file_to_a_worker(tmp_path, forks):
    """`train.py` calls the helper of `losses/kl.py` (whose finding names that call) and holds a
    statement deeper than the pre-pass lets reach LibCST: linting `kl.py` parses `train.py` whole
    for its calls, which only a worker may do. The findings are those of a run without the cache."""
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "losses").mkdir()
    (tmp_path / "losses" / "kl.py").write_text(textwrap.dedent(KL_HELPER))
    train = textwrap.dedent(_train("from losses.kl import consistency_kl", "consistency_kl(student_logits, teacher_logits)"))
    cache = str(tmp_path / "cache")
    helper = tmp_path / "losses" / "kl.py"
    for deep, workers_started in (("", False), ("DEEP = " + "-" * 1600 + "1\n", True)):
        (tmp_path / "train.py").write_text(train + deep)
        run([str(tmp_path)], Settings(), options=Options(cache=True, cache_dir=cache))
        with helper.open("a") as handle:
            handle.write("# edited\n")
        callers._parsed.cache_clear()  # (callers' files this process parsed are not parsed again)
        del forks[:]
        here = _one_file(helper, cache=True, cache_dir=cache, jobs=2)
        assert bool(forks) == workers_started
        expected = _one_file(helper, cache=False)
        assert here == expected
        assert [finding[1] for finding in expected[0]] == [6] and "train.py:8" in expected[0][0][6]
