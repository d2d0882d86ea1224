"""The flake8 extension, through the real flake8 in a subprocess: `flake8 --select TNL` prints the
same `line:col` and code for every finding as `torchnumlint` on the same file, noqa and flake8's
own selection apply, a file that is not Python gets flake8's E999 and nothing from the plugin."""

import json
import re
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("flake8")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "unsafe_training.py"

TRAIN = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F


    def distill(student, x):
    \tlog_p = torch.log(F.softmax(student(x), dim=-1))
    \treturn log_p, torch.log(1 + x)


    def gate(z):
        return torch.log(1 - torch.sigmoid(z)), torch.log(torch.sigmoid(z))  # noqa: TNL104
    """
)


def _flake8(folder: Path, *args: str) -> list:
    """flake8's findings as (path, line, col, code), with no user configuration (`--isolated`):
    the extension comes from the installed package's `flake8.extension` entry point."""
    out = subprocess.run([sys.executable, "-m", "flake8", "--isolated", *args], capture_output=True, text=True, cwd=folder)
    assert out.returncode in (0, 1), out.stderr
    return re.findall(r"^(.+?):(\d+):(\d+): (\w+) ", out.stdout, re.M)


def _torchnumlint(folder: Path, name: str) -> list:
    out = subprocess.run(
        [sys.executable, "-m", "torchnumlint", "--output-format", "json", "--no-cache", name],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    return sorted((f["location"]["row"], f["location"]["column"], f["code"]) for f in json.loads(out.stdout))


def _copied(tmp_path: Path, *files: Path) -> Path:
    for path in files:
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _found(rows: list, name: str) -> list:
    return sorted((int(line), int(col), code) for path, line, col, code in rows if Path(path).name == name)


def test_same_line_and_column_as_torchnumlint(tmp_path):
    _copied(tmp_path, EXAMPLE)
    (tmp_path / "train.py").write_text(TRAIN)
    for name in ("unsafe_training.py", "train.py"):
        ours = _torchnumlint(tmp_path, name)
        theirs = _found(_flake8(tmp_path, "--select", "TNL", name), name)
        assert theirs == ours and len(ours) >= 2, (name, theirs, ours)
    # a tab-indented line, the column after the tab; the noqa line silent in both
    assert _found(_flake8(tmp_path, "--select", "TNL", "train.py"), "train.py") == [(6, 10, "TNL103"), (7, 16, "TNL106")]


def test_flake8_selection_and_its_own_noqa(tmp_path):
    _copied(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN.replace("(1 + x)", "(1 + x)  # noqa: TNL106"))
    assert _found(_flake8(tmp_path, "--select", "TNL", "train.py"), "train.py") == [(6, 10, "TNL103")]
    assert _found(_flake8(tmp_path, "--select", "TNL", "--extend-ignore", "TNL103", "train.py"), "train.py") == []
    assert _found(_flake8(tmp_path, "--select", "TNL106", "train.py"), "train.py") == []


def test_a_file_that_is_not_python_gets_e999_only(tmp_path):
    _copied(tmp_path)
    (tmp_path / "broken.py").write_text("import torch\ndef f(x:\n    return torch.log(torch.softmax(x, -1))\n")
    codes = [code for _, _, _, code in _flake8(tmp_path, "--select", "TNL,E999", "broken.py")]
    assert codes == ["E999"]


def test_the_package_declares_the_flake8_entry_point():
    assert any(
        ep.name == "TNL" and ep.value == "torchnumlint.flake8_plugin:TorchNumLint" for ep in metadata.entry_points(group="flake8.extension")
    )
