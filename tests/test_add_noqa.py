"""`--add-noqa`, `--fix-only`, `--show-fixes` on real files through the installed command."""

import json

from tests.test_cli import run

LEGACY = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "\n"
    "\n"
    "def f(x, t):\n"
    "    a = torch.log(F.softmax(x, dim=-1))\n"
    "    b = torch.log(F.softmax(x, dim=-1))  # noqa: TNL101\n"
    "    c = torch.log(F.softmax(x, dim=-1))  # type: ignore\n"
    "    d = torch.log(F.softmax(x, dim=-1))  # noqa\n"
    "    e = torch.log(\n"
    "        F.softmax(x, dim=-1)) + len('''\n"
    "text''')\n"
    "    return a, b, c, d, e\n"
)


def test_add_noqa_silences_every_finding_and_merges_with_existing_comments(tmp_path):
    path = tmp_path / "legacy.py"
    path.write_bytes(LEGACY.replace("\n", "\r\n").encode())
    out = run("--add-noqa", "legacy.py", cwd=tmp_path)
    assert out.returncode == 0 and "Added 4 noqa directives." in out.stderr, out.stderr
    text = path.read_bytes().decode()
    assert "\r\n" in text and "\n" not in text.replace("\r\n", "")  # line endings kept
    lines = text.split("\r\n")
    assert lines[5].endswith("dim=-1))  # noqa: TNL103")
    assert lines[6].endswith("# noqa: TNL101, TNL103")
    assert lines[7].endswith("# type: ignore  # noqa: TNL103")
    assert lines[8].endswith("# noqa")  # a bare noqa already covers it
    assert lines[9].endswith("torch.log(  # noqa: TNL103")  # not inside the string that goes on
    assert lines[11] == "text''')"
    assert run("legacy.py", cwd=tmp_path).returncode == 0
    again = run("--add-noqa", "legacy.py", cwd=tmp_path)
    assert "Added 0 noqa directives." in again.stderr and path.read_bytes().decode() == text


def test_add_noqa_in_a_notebook_cell_keeps_the_rest_of_the_json(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}],
            "source": ["import torch\n", "import torch.nn.functional as F\n", "x = torch.randn(3)\n"],
        },
        {
            "cell_type": "code",
            "execution_count": 2,
            "metadata": {},
            "outputs": [],
            "source": ["%timeit x\n", "p = torch.log(F.softmax(x, dim=-1))"],
        },
    ]
    notebook = {"cells": cells, "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    assert run("--add-noqa", "train.ipynb", cwd=tmp_path).returncode == 0
    after = json.loads(path.read_text())
    assert after["cells"][2]["source"] == ["%timeit x\n", "p = torch.log(F.softmax(x, dim=-1))  # noqa: TNL103"]
    assert after["cells"][:2] == cells[:2] and after["metadata"] == notebook["metadata"]
    assert run("train.ipynb", cwd=tmp_path).returncode == 0


def test_fix_only_reports_nothing_else_and_show_fixes_lists_them(tmp_path):
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "guide.py").write_text(
        "import torch\n\n\ndef step(model, x, opt):\n    with torch.autocast('cuda', dtype=torch.float16):\n"
        "        loss = model(x)\n    loss.backward()\n"
    )
    out = run("--fix-only", "--show-fixes", ".", cwd=tmp_path)
    assert out.returncode == 0, out.stderr  # TNL302 (no fix) remains: --fix-only does not fail on it
    assert "TNL302" not in out.stdout
    assert out.stdout.splitlines() == [
        "Fixed 4 findings.",
        "Fixed findings:",
        "legacy.py:",
        "  4 × TNL103 (log-of-softmax)",
    ]
    assert "F.log_softmax" in (tmp_path / "legacy.py").read_text()
    assert run("--show-fixes", ".", cwd=tmp_path).returncode == 2  # nothing to list without a fix


def test_add_noqa_does_not_mix_with_fix(tmp_path):
    (tmp_path / "legacy.py").write_text(LEGACY)
    out = run("--add-noqa", "--fix", "legacy.py", cwd=tmp_path)
    assert out.returncode == 2 and "--add-noqa" in out.stderr
    assert (tmp_path / "legacy.py").read_text() == LEGACY
