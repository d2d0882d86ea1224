"""The smaller items of issue 21 (item 8), through the installed command: a file nested beyond
CPython's parser says why it cannot be parsed, and a notebook with a cell in another language
(VS Code's JavaScript cell) has its Python cells linted and keeps that cell byte for byte."""

import json

from tests.test_cli import run

SOFTMAX_LOG = ["import torch\n", "x = torch.randn(3)\n", "loss = torch.log(torch.softmax(x, -1))"]


def test_a_20000_deep_not_chain_says_why_it_cannot_be_parsed(tmp_path):
    (tmp_path / "deep.py").write_text("import torch\nx = " + "not " * 20000 + "y\n")
    (tmp_path / "ok.py").write_text("import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n")
    done = run("--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "deep.py: cannot parse: the file is nested too deeply (or is too large) for CPython's parser" in done.stderr
    assert "ok.py:5:" in done.stdout


def _notebook(cells):
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    }


def _cell(source, language=None):
    metadata = {"vscode": {"languageId": language}} if language else {}
    return {"cell_type": "code", "metadata": metadata, "execution_count": None, "outputs": [], "source": source}


def test_a_notebook_with_a_javascript_cell_lints_its_python_cells(tmp_path):
    script = ["const x = document.querySelector('#plot');\n", "x.innerHTML = `<b>${1 + 1}</b>`;"]
    book = _notebook([_cell(SOFTMAX_LOG[:2]), _cell(script, "javascript"), _cell(SOFTMAX_LOG[2:], "python")])
    path = tmp_path / "explore.ipynb"
    path.write_text(json.dumps(book, indent=1))
    done = run("--no-cache", "--output-format", "json", "explore.ipynb", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert [(f["code"], f["cell"]) for f in json.loads(done.stdout)] == [("TNL103", 3)]
    fixed = run("--no-cache", "--fix", "explore.ipynb", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    cells = json.loads(path.read_text())["cells"]
    assert cells[1]["source"] == script and "log_softmax" in "".join(cells[2]["source"])


def test_an_empty_tuple_where_a_tensor_goes_is_no_internal_error(tmp_path):
    """Found by the fuzz suite: stripping the parentheses of `()` made a node LibCST refuses."""
    (tmp_path / "odd.py").write_text("import torch\ny = torch.log(torch.sigmoid(()))\nz = torch.log(())\n")
    done = run("--no-cache", "odd.py", cwd=tmp_path)
    assert "internal error" not in done.stdout + done.stderr and done.returncode == 1, done.stdout + done.stderr
