"""Next to ruff (the real one, when installed: the dev extra has it): ruff calls a `# noqa:
TNL...` code it does not know invalid (RUF102) and `--fix` deletes the comment, unless
`lint.external = ["TNL"]` says the codes belong to another tool, as the README says."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff is not installed")

SOURCE = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "\n"
    "\n"
    "def f(x):\n"
    "    return torch.log(F.softmax(x, dim=-1))  # noqa: TNL103\n"
    "\n"
    "\n"
    "def g(x):\n"
    "    return torch.log(F.softmax(x, dim=-1))  # noqa: TNL1\n"
)


def _ruff(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--select", "RUF100,RUF102", *args, "."], capture_output=True, text=True, cwd=folder, timeout=120
    )


def test_without_external_ruff_deletes_the_comments(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ruff.lint]\n")
    (tmp_path / "m.py").write_text(SOURCE)
    out = _ruff(tmp_path, "--output-format", "concise")
    assert out.returncode == 1 and out.stdout.count("RUF102") == 2, out.stdout
    _ruff(tmp_path, "--fix")
    assert "noqa" not in (tmp_path / "m.py").read_text()


def test_external_keeps_them(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nexternal = ["TNL"]\n')
    (tmp_path / "m.py").write_text(SOURCE)
    out = _ruff(tmp_path, "--fix")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "m.py").read_text() == SOURCE
