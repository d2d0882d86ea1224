"""`--fix` never loses an edit saved while it runs, leaves no temporary file behind a killed run,
and treats two hard links to one file as one file (issue 21, items 2 and 8).

The race is driven by `atomic_write.before_swap`, called between the last check and the swap: the
test saves its edit there, the worst moment, every time (no timing)."""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from torchnumlint import atomic_write
from torchnumlint.commands import cli

FIXABLE = "import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, dim=-1))\n"
EDIT = "import torch\n\n\ndef f(x):\n    return x  # saved by the user meanwhile\n"


def fix(*paths):
    return CliRunner().invoke(cli, ["--fix", "--no-cache", "--jobs", "1", *map(str, paths)])


def temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith(atomic_write.PREFIX))


def save_in_place(path):
    with open(path, "w") as handle:
        handle.write(EDIT)


def save_by_rename(path):  # what most editors do: write a new file, rename it over
    with open(path + ".swp", "w") as handle:
        handle.write(EDIT)
    os.replace(path + ".swp", path)


@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_an_edit_saved_between_the_check_and_the_swap_is_kept(tmp_path, monkeypatch, save):
    path = tmp_path / "train.py"
    path.write_text(FIXABLE)
    monkeypatch.setattr(atomic_write, "before_swap", save)
    done = fix(path)
    assert path.read_text() == EDIT
    assert done.exit_code == 2 and f"{path}: not written: the file changed while it was being linted" in done.output
    assert temporaries(tmp_path) == []


def test_without_an_atomic_exchange_an_edit_in_place_is_put_back(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text(FIXABLE)
    monkeypatch.setattr(atomic_write, "_exchange", lambda a, b: False)
    monkeypatch.setattr(atomic_write, "before_swap", save_in_place)
    done = fix(path)
    assert path.read_text() == EDIT and done.exit_code == 2, done.output
    assert temporaries(tmp_path) == []


def test_with_no_edit_the_fix_goes_in(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(FIXABLE)
    os.chmod(path, 0o640)
    done = fix(path)
    assert done.exit_code == 0, done.output
    assert "log_softmax" in path.read_text() and oct(path.stat().st_mode & 0o777) == "0o640"
    assert temporaries(tmp_path) == []


def test_a_killed_runs_temporary_file_is_removed_and_a_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"{atomic_write.PREFIX}{int(dead.stdout)}-x1y2{atomic_write.SUFFIX}"
    live = tmp_path / f"{atomic_write.PREFIX}{os.getppid()}-z3w4{atomic_write.SUFFIX}"
    left.write_text("half a file")
    live.write_text("being written")
    (tmp_path / "train.py").write_text(FIXABLE)
    done = subprocess.run(
        [sys.executable, "-m", "torchnumlint", "--fix", "--no-cache", "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert temporaries(tmp_path) == [live.name]


def test_hard_links_to_one_file_are_fixed_once_without_a_spurious_change(tmp_path):
    first = tmp_path / "a.py"
    first.write_text(FIXABLE)
    os.link(first, tmp_path / "b.py")
    done = subprocess.run(
        [sys.executable, "-m", "torchnumlint", "--fix", "--no-cache", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "changed while" not in done.stdout + done.stderr
    assert "log_softmax" in (tmp_path / "b.py").read_text() and os.stat(first).st_nlink == 2
