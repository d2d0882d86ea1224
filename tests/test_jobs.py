"""Worker processes (`--jobs`): the same output, in the same order, as a serial run; a worker
that crashes or hangs costs its file (named in the error), never the run."""

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchnumlint import runner
from torchnumlint.commands import cli
from torchnumlint.config import Settings
from torchnumlint.runner import Options, run
from torchnumlint.workers import can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="workers are forked")

BAD = "import torch.nn.functional as F\ny = F.kl_div(a, F.softmax(b, -1))\n"


def real_files(tmp_path, count=200, largest=40_000):
    """`count` of the installed torch package's own sources, copied into a project of their own."""
    import torch  # noqa: F401 - only to locate the sources

    base = Path(torch.__file__).parent
    picked = [p for p in sorted(base.rglob("*.py")) if "test" not in p.parts and p.stat().st_size < largest][:count]
    for path in picked:
        target = tmp_path / "project" / path.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    (tmp_path / "project" / "setup.py").write_text("")
    return tmp_path / "project"


def test_workers_give_the_serial_output_in_the_same_order(tmp_path):
    project = real_files(tmp_path)
    for name in ("aa", "zz", "_vendor/mid"):  # findings and errors spread among them
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / f"{name}_bad.py").write_text(BAD)
        (project / f"{name}_broken.py").write_text("import torch\nx = (\n")
    serial = run([str(project)], Settings(), options=Options())
    parallel = run([str(project)], Settings(), options=Options(jobs=2))
    assert serial.files == parallel.files >= 150
    assert len(serial.findings) >= 3 and parallel.findings == serial.findings
    assert len(serial.errors) == 3 and parallel.errors == serial.errors
    assert [f.noqa_lines for f in parallel.findings] == [f.noqa_lines for f in serial.findings]


def write(folder, **files):
    for name, body in files.items():
        (folder / f"{name}.py").write_text(body)


def _crash_on(name, how):
    real = runner.process_file

    def process_file(source, *args):
        if source.path.endswith(name):
            how()
        return real(source, *args)

    return process_file


def test_a_worker_that_crashes_is_that_files_error(tmp_path, monkeypatch):
    write(tmp_path, a=BAD, b="import torch\n", c=BAD)
    monkeypatch.setattr(runner, "process_file", _crash_on("b.py", lambda: os.kill(os.getpid(), signal.SIGSEGV)))
    result = run([str(tmp_path)], Settings(), options=Options(jobs=2))
    assert sorted({Path(f.path).name for f in result.findings}) == ["a.py", "c.py"]
    assert result.errors == [f"{tmp_path / 'b.py'}: internal error in torchnumlint (please report it): the worker process died (SIGSEGV)"]


def test_a_worker_that_hangs_is_that_files_error(tmp_path, monkeypatch):
    write(tmp_path, a=BAD, b="import torch\n", c=BAD)
    monkeypatch.setattr(runner, "process_file", _crash_on("b.py", lambda: time.sleep(600)))
    result = run([str(tmp_path)], Settings(), options=Options(jobs=2, timeout=2))
    assert sorted({Path(f.path).name for f in result.findings}) == ["a.py", "c.py"]
    assert result.errors == [f"{tmp_path / 'b.py'}: gave up after 2 s (the time limit per file)"]


def test_an_exception_around_the_engine_is_that_files_error(tmp_path, monkeypatch):
    write(tmp_path, a=BAD, b="import torch\n")

    def fail():
        raise MemoryError("out of memory")

    monkeypatch.setattr(runner, "process_file", _crash_on("b.py", fail))
    result = run([str(tmp_path)], Settings(), options=Options(jobs=1))
    assert {Path(f.path).name for f in result.findings} == {"a.py"}
    assert result.errors == [f"{tmp_path / 'b.py'}: internal error in torchnumlint (please report it): MemoryError: out of memory"]


def test_an_expression_too_big_for_the_parser_costs_at_most_its_file(tmp_path):
    """A 10,000-term expression once ran for minutes, then segfaulted the whole run."""
    write(tmp_path, a=BAD, huge="import torch\nx = " + " + ".join(f"torch.exp(v{i})" for i in range(10_000)) + "\n")
    result = run([str(tmp_path)], Settings(), options=Options(jobs=2, timeout=20))
    assert any(f.path.endswith("a.py") for f in result.findings)
    assert all(error.startswith(f"{tmp_path / 'huge.py'}: ") for error in result.errors)


def test_cli_jobs_flag_gives_the_same_output(tmp_path):
    write(tmp_path, a=BAD, b="import torch\nz = torch.log(torch.sigmoid(x))\n", c="x = (\n")
    cli_runner = CliRunner()
    outputs = [cli_runner.invoke(cli, [str(tmp_path), "--no-cache", *extra]) for extra in ([], ["-j", "1"], ["--jobs", "2"])]
    assert {(o.exit_code, o.output) for o in outputs} == {(outputs[0].exit_code, outputs[0].output)}
    assert outputs[0].exit_code == 2 and "a.py:2:" in outputs[0].output and "c.py: cannot parse" in outputs[0].output


def test_a_worker_is_stopped_after_an_item_it_must_not_keep_the_memory_of():
    from torchnumlint.workers import run_all

    weight = lambda item: 10 if item == 2 else 1  # noqa: E731
    pids = list(run_all(lambda item: (item, os.getpid()), [1, 2, 3, 4], 1, lambda item, why: (item, why), weight=weight, recycle_above=5))
    assert [item for item, _ in pids] == [1, 2, 3, 4]
    assert pids[0][1] == pids[1][1] != pids[2][1] == pids[3][1]  # a fresh worker after item 2
    kept = list(run_all(lambda item: os.getpid(), [1, 2, 3], 1, lambda item, why: why))
    assert len(set(kept)) == 1


def test_files_in_recycled_workers_give_the_same_findings(tmp_path, monkeypatch):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "setup.py").write_text("")
    for i in range(6):
        (folder / f"m{i}.py").write_text(BAD + "z = 1\n" * (i * 40))
    expected = run([str(folder)], Settings(), options=Options(cache=False))
    monkeypatch.setattr(runner, "LARGE_FILE", 200)  # m1 to m5 are large: each in a worker of its own
    recycled = run([str(folder)], Settings(), options=Options(cache=False, jobs=2))
    assert (recycled.findings, recycled.errors) == (expected.findings, expected.errors) and len(expected.findings) == 12


def _span(item):
    """(item, when its worker started it, when it finished) on the clock every process shares."""
    start = time.monotonic()
    time.sleep(0.05 if item[0] == "small" else 0.3)
    return item, start, time.monotonic()


def test_two_large_items_are_never_in_flight_at_once():
    from torchnumlint.workers import run_all

    items = [("large", 0), ("small", 1), ("large", 2), ("small", 3), ("small", 4), ("large", 5)]
    weight = lambda item: 1000 if item[0] == "large" else 1  # noqa: E731
    spans = list(run_all(_span, items, 3, lambda item, why: why, weight=weight, recycle_above=100))
    assert [item for item, _, _ in spans] == items  # in order, whatever order they ran in
    large = sorted((start, end) for item, start, end in spans if item[0] == "large")
    assert all(end <= next_start for (_, end), (next_start, _) in zip(large, large[1:]))


def test_the_heaviest_items_go_first_and_one_worker_keeps_the_order():
    from torchnumlint.workers import _order

    weights = [1] * 20 + [30, 2, 40]
    assert _order(weights, 2) == [22, 20] + list(range(20)) + [21]  # each over 1/8 of a worker's share (23.5)
    assert _order(weights, 1) == list(range(23))
    assert _order([5] * 10, 2) == list(range(10))  # nothing stands out: the order they came in


_KEPT = []  # what an item leaves behind in its worker


def _keep(item):
    if item == 2:
        _KEPT.append(b"x" * 100_000_000)  # written, so resident, and kept
    return item, os.getpid()


def test_a_worker_that_grew_past_the_limit_is_replaced(monkeypatch):
    from torchnumlint import workers

    monkeypatch.setattr(workers, "GROWTH_LIMIT", 50_000_000)  # inherited by the forked workers
    pids = list(workers.run_all(_keep, [1, 2, 3, 4], 1, lambda item, why: (item, why)))
    assert [item for item, _ in pids] == [1, 2, 3, 4]
    assert pids[0][1] == pids[1][1] != pids[2][1] == pids[3][1]  # a fresh worker after item 2


_INHERITED = []  # memory the parent wrote before the fork: resident in a worker from its start


def _touch(item):
    if item == 2:
        block = _INHERITED[0]
        for at in range(0, len(block), 4096):  # a write to each page copies it into the worker
            block[at] = 1
    return item, os.getpid()


def test_a_worker_that_copied_the_parents_pages_past_the_limit_is_replaced(monkeypatch):
    """Reading the project's facts writes their reference counts: the pages are copied into the
    worker, its private memory grows and its resident memory does not (it counted them shared)."""
    from torchnumlint import workers

    monkeypatch.setattr(workers, "GROWTH_LIMIT", 50_000_000)
    monkeypatch.setattr(sys.modules[__name__], "_INHERITED", [bytearray(b"x" * 100_000_000)])
    pids = list(workers.run_all(_touch, [1, 2, 3, 4], 1, lambda item, why: (item, why)))
    assert [item for item, _ in pids] == [1, 2, 3, 4]
    assert pids[0][1] == pids[1][1] != pids[2][1] == pids[3][1]  # a fresh worker after item 2


def _children(parent):
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                if entry.isdigit() and int(handle.read().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


_OTHERS = set()  # the children the test process had before the pool: not its workers


def _alone(item):
    """The heavy item: whether the other worker, idle beside it, was stopped (polled a while)."""
    if item != "heavy":
        return item
    for _ in range(500):
        if set(_children(os.getppid())) - _OTHERS == {os.getpid()}:
            return True
        time.sleep(0.01)
    return False


def test_a_worker_left_idle_beside_a_heavy_item_is_stopped(monkeypatch):
    """It would keep what its last items left while the heavy item's tree is built."""
    from torchnumlint.workers import run_all

    monkeypatch.setattr(sys.modules[__name__], "_OTHERS", set(_children(os.getpid())))  # inherited by the workers
    items = [f"small {i}" for i in range(30)] + ["heavy"]
    weight = lambda item: 4 if item == "heavy" else 2  # noqa: E731 - not sent first (4 * 8 is not over a worker's share, 32)
    results = list(run_all(_alone, items, 2, lambda item, why: why, weight=weight, budget=4))
    assert results == items[:-1] + [True]


def test_items_in_flight_stay_within_the_budget_and_light_ones_run_beside_heavy_ones():
    from torchnumlint.workers import run_all

    items = [("heavy", 0), ("heavy", 1), ("small", 2), ("heavy", 3), ("small", 4), ("small", 5), ("small", 6)]
    weights = {"heavy": 60, "small": 10}
    spans = list(run_all(_span, items, 2, lambda item, why: why, weight=lambda item: weights[item[0]], budget=80))
    assert [item for item, _, _ in spans] == items  # in order, whatever order they ran in
    for item, start, end in spans:  # at each start, what was in flight then fits the budget
        in_flight = sum(weights[other[0]] for other, s, e in spans if s <= start < e)
        assert in_flight <= 80, (item, in_flight)
    heavy = [(s, e) for item, s, e in spans if item[0] == "heavy"]
    assert any(s < e2 and s2 < e for item, s, e in spans if item[0] == "small" for s2, e2 in heavy)  # side by side
