"""Jupyter notebooks, linted and fixed by the installed `torchnumlint` command as a user runs it.

Every notebook here is nbformat 4 JSON written the way Jupyter writes it (or, where the point is
that any layout survives a fix, the way another tool might): markdown and code cells, outputs
(streams, an image), execution counts and metadata.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchnumlint.notebook import BOUNDARY, mask
from torchnumlint.source import SourceError, read_source

EXE = Path(sys.executable).with_name("torchnumlint")
SOFTMAX_LOG = "a = torch.log(torch.softmax(x, dim=-1))"
FIXED_LOG = "a = torch.log_softmax(x, dim=-1)"


def run(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([str(EXE), "--no-cache", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def code(*lines, count=1):
    return {
        "cell_type": "code",
        "execution_count": count,
        "id": f"c{count}",
        "metadata": {"tags": ["train"], "collapsed": False},
        "outputs": [
            {"name": "stdout", "output_type": "stream", "text": ["loss: 0.25 → ok\n", "done\n"]},
            {
                "data": {
                    "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
                    "text/plain": ["<Figure size 640x480 with 1 Axes>"],
                },
                "metadata": {},
                "output_type": "display_data",
            },
        ],
        "source": list(lines),
    }


def markdown(text):
    return {"cell_type": "markdown", "id": "md", "metadata": {}, "source": [text]}


def notebook(*cells, language="python"):
    return {
        "cells": list(cells),
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"},
            "language_info": {"name": language, "version": "3.11.4"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write(path, nb, **dumps):
    """As Jupyter writes a notebook (nbformat.write): indent 1, non-ASCII as is, a final newline."""
    options = {"indent": 1, "ensure_ascii": False, "sort_keys": True, **dumps}
    path.write_text(json.dumps(nb, **options) + "\n", encoding="utf-8")
    return path


def lines_of(out):
    return [line for line in out.stdout.splitlines() if line.startswith(("train", "nb/", "notebooks"))]


TRAIN = notebook(
    markdown("# Training\n"),
    code("import torch\n", "!pip install torch\n", "%matplotlib inline\n", "x = torch.randn(4, 3)", count=1),
    code("probs = torch.softmax(x, dim=-1)\n", count=2),
    markdown("Now log the probabilities.\n"),
    code("%%time\n", "for step in range(3):\n", "    %timeit x + 1\n", "    logp = torch.log(probs)\n", count=3),
)


def test_names_follow_across_cells_and_findings_name_the_cell(tmp_path):
    write(tmp_path / "train.ipynb", TRAIN)
    out = run("train.ipynb", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert lines_of(out) == [
        "train.ipynb:cell 5:4:12: TNL103 log of a softmax is -inf once a probability underflows to 0 "
        "(then NaN in 0 * log 0 and in the gradient); use `log_softmax` (the fix makes `probs` hold "
        "log-probabilities) [*]"
    ]
    # the snippet is the cell's own line, numbered as in the cell
    assert "4 |     logp = torch.log(probs)" in out.stdout
    assert out.stderr == ""


def test_json_gives_the_cell_and_the_line_in_it(tmp_path):
    write(tmp_path / "train.ipynb", TRAIN)
    [item] = json.loads(run("--output-format", "json", "train.ipynb", cwd=tmp_path).stdout)
    assert (item["filename"], item["cell"], item["location"], item["end_location"]) == (
        "train.ipynb",
        5,
        {"row": 4, "column": 12},
        {"row": 4, "column": 28},
    )


def test_every_machine_format_names_the_cell(tmp_path):
    """The line of a notebook finding counts within its cell, so each format says which cell."""
    write(tmp_path / "train.ipynb", TRAIN)
    sarif = json.loads(run("--output-format", "sarif", "train.ipynb", cwd=tmp_path).stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["properties"] == {"cell": 5} and result["message"]["text"].startswith("cell 5: ")
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert "train.ipynb:cell 5:4:12: TNL103" in run("--output-format", "github", "train.ipynb", cwd=tmp_path).stdout
    [issue] = json.loads(run("--output-format", "gitlab", "train.ipynb", cwd=tmp_path).stdout)
    assert issue["description"].startswith("TNL103 cell 5: ")
    assert "cell 5, line 4, col 12, TNL103" in run("--output-format", "junit", "train.ipynb", cwd=tmp_path).stdout


def test_a_python_file_has_no_cell(tmp_path):
    (tmp_path / "train.py").write_text("import torch\n" + SOFTMAX_LOG + "\n")
    [item] = json.loads(run("--output-format", "json", "train.py", cwd=tmp_path).stdout)
    assert item["cell"] is None and item["location"] == {"row": 2, "column": 5}


def test_folder_recursion_finds_notebooks_but_not_checkpoints(tmp_path):
    (tmp_path / "notebooks" / "deep").mkdir(parents=True)
    (tmp_path / "notebooks" / ".ipynb_checkpoints").mkdir()
    write(tmp_path / "notebooks" / "deep" / "train.ipynb", TRAIN)
    write(tmp_path / "notebooks" / ".ipynb_checkpoints" / "train-checkpoint.ipynb", TRAIN)
    out = run(".", cwd=tmp_path)
    assert out.returncode == 1
    assert [line.split(": ")[0] for line in lines_of(out)] == ["notebooks/deep/train.ipynb:cell 5:4:12"]


def test_magics_and_shell_lines_are_skipped_and_the_rest_of_the_cell_linted(tmp_path):
    write(
        tmp_path / "train.ipynb",
        notebook(
            code(
                "import torch\n",
                "files = !ls -la\n",
                "torch.softmax?\n",
                "%load_ext autoreload\n",
                "x = torch.randn(3)\n",
                "if True:\n",
                "    !echo \\\n",
                "        continued\n",
                "    " + SOFTMAX_LOG + "\n",
            )
        ),
    )
    out = run("train.ipynb", cwd=tmp_path)
    assert [line.split(": ")[0] for line in lines_of(out)] == ["train.ipynb:cell 1:9:9"]
    assert out.stderr == ""


def test_a_non_python_cell_magic_hides_its_cell_only(tmp_path):
    write(
        tmp_path / "train.ipynb",
        notebook(
            code("%%bash\n", "echo " + SOFTMAX_LOG + "\n", "  pip install torch\n", count=1),
            code("%%writefile helper.py\n", "import torch\n", SOFTMAX_LOG + "\n", count=2),
            code("import torch\n", "x = torch.randn(3)\n", SOFTMAX_LOG, count=3),
        ),
    )
    out = run("train.ipynb", cwd=tmp_path)
    assert [line.split(": ")[0] for line in lines_of(out)] == ["train.ipynb:cell 3:3:5"]
    assert out.stderr == ""


def test_percent_and_bang_lines_inside_python_are_python(tmp_path):
    # a `%` line in brackets is a modulo, a `!` line in a string is text: masking either would
    # make a syntax error (or hide code), and the finding below would move or vanish
    write(
        tmp_path / "train.ipynb",
        notebook(
            code(
                "import torch\n",
                "n = (7\n",
                "     % 3)\n",
                'doc = """\n',
                "!not a shell line\n",
                '"""\n',
                "x = torch.randn(n)\n",
                SOFTMAX_LOG + "\n",
            )
        ),
    )
    out = run("train.ipynb", cwd=tmp_path)
    assert [line.split(": ")[0] for line in lines_of(out)] == ["train.ipynb:cell 1:8:5"]
    assert out.stderr == ""


def test_masking_keeps_every_line_and_its_length():
    cell = "%%time\nimport torch\n!pip install x\n  %timeit f()\n!l\n"
    masked = mask(cell)
    assert [len(line) for line in masked.split("\n")] == [len(line) for line in cell.split("\n")]
    assert masked.split("\n") == ["#     ", "import torch", "...           ", "  ...        ", "0 ", ""]
    assert mask("%%bash\necho hi\n\n  ls\n") == "#     \n#      \n\n#   \n"


def test_noqa_in_a_cell_suppresses(tmp_path):
    write(tmp_path / "train.ipynb", notebook(code("import torch\n", "x = torch.randn(3)\n", SOFTMAX_LOG + "  # noqa: TNL103\n")))
    assert run("train.ipynb", cwd=tmp_path).returncode == 0


def test_fix_rewrites_only_the_changed_cell_and_keeps_every_other_byte(tmp_path):
    nb = notebook(
        markdown("# Étude\n"),
        code("import torch\n", "%matplotlib inline\n", "x = torch.randn(4)\n", count=1),
        code("!nvidia-smi\n", SOFTMAX_LOG + "  # é\n", "b = torch.log(torch.sigmoid(x))", count=2),
        code("y = x * 2\n", count=3),
    )
    path = write(tmp_path / "train.ipynb", nb)
    before = path.read_bytes()
    out = run("--fix", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Fixed 2 findings" in out.stdout
    expected = (
        before.decode()
        .replace(json.dumps(SOFTMAX_LOG + "  # é\n", ensure_ascii=False), json.dumps(FIXED_LOG + "  # é\n", ensure_ascii=False))
        .replace('"b = torch.log(torch.sigmoid(x))"', '"b = torch.nn.functional.logsigmoid(x)"')
    )
    assert path.read_text(encoding="utf-8") == expected
    assert json.loads(expected)["cells"][2]["source"][0] == "!nvidia-smi\n"  # the magic is back


@pytest.mark.parametrize(
    "dumps",
    [
        {"indent": 2, "ensure_ascii": True, "sort_keys": False},  # another tool's layout, ASCII-escaped
        {"indent": None, "ensure_ascii": False, "sort_keys": False},  # one line
        {"indent": "\t", "ensure_ascii": True, "sort_keys": True},
    ],
)
@pytest.mark.parametrize("as_string", [False, True])
def test_fix_keeps_the_layout_it_found(tmp_path, dumps, as_string):
    cell = code("import torch\n", "x = torch.randn(4)  # π\n", SOFTMAX_LOG + "\n", "y = 1", count=1)
    if as_string:
        cell["source"] = "".join(cell["source"])  # nbformat allows one string
    cell = {"source": cell.pop("source"), **cell}  # key order other than Jupyter's
    path = tmp_path / "train.ipynb"
    text = json.dumps(notebook(markdown("ü\n"), cell), **dumps)  # and no final newline
    path.write_text(text, encoding="utf-8")
    assert run("--fix", "train.ipynb", cwd=tmp_path).returncode == 0
    old, new = json.dumps(SOFTMAX_LOG, **dumps)[1:-1], json.dumps(FIXED_LOG, **dumps)[1:-1]
    assert old in text
    assert path.read_text(encoding="utf-8") == text.replace(old, new)


def test_fix_that_keeps_names_across_cells_is_clean_afterwards(tmp_path):
    path = write(
        tmp_path / "train.ipynb",
        notebook(
            code("import torch\n", "x = torch.randn(3)\n", count=1),
            code("%time " + SOFTMAX_LOG + "\n", SOFTMAX_LOG + "\n", count=2),
        ),
    )
    assert run("--fix", "train.ipynb", cwd=tmp_path).returncode == 0
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert cells[1]["source"] == ["%time " + SOFTMAX_LOG + "\n", FIXED_LOG + "\n"]
    assert cells[1]["outputs"] == code()["outputs"]
    assert run("train.ipynb", cwd=tmp_path).returncode == 0


def test_diff_shows_each_changed_cell(tmp_path):
    path = write(
        tmp_path / "train.ipynb", notebook(markdown("# x\n"), code("import torch\n", "x = torch.randn(3)\n", SOFTMAX_LOG, count=1))
    )
    before = path.read_bytes()
    out = run("--diff", "train.ipynb", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout == (
        "--- a/train.ipynb:cell 2\n+++ b/train.ipynb:cell 2\n@@ -1,3 +1,3 @@\n import torch\n x = torch.randn(3)\n"
        f"-{SOFTMAX_LOG}\n\\ No newline at end of cell\n+{FIXED_LOG}\n\\ No newline at end of cell\n"
    )
    assert path.read_bytes() == before


def test_broken_notebooks_are_one_line_errors_and_the_run_goes_on(tmp_path):
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "bad.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n', encoding="utf-8")
    write(tmp_path / "nb" / "old.ipynb", {"cells": [], "metadata": {}, "nbformat": 3, "nbformat_minor": 0})
    (tmp_path / "nb" / "list.ipynb").write_text("[1, 2]\n", encoding="utf-8")
    write(tmp_path / "nb" / "train.ipynb", TRAIN)
    out = run("nb", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "nb/bad.ipynb: not a notebook: invalid JSON at line 3, column 1: Expecting property name enclosed in double quotes",
        "nb/list.ipynb: not a notebook in nbformat 4 (no nbformat field)",
        "nb/old.ipynb: not a notebook in nbformat 4 (nbformat 3)",
    ]
    assert [line.split(": ")[0] for line in lines_of(out)] == ["nb/train.ipynb:cell 5:4:12"]


def test_a_syntax_error_names_its_cell(tmp_path):
    write(tmp_path / "train.ipynb", notebook(code("import torch\n", count=1), code("x = (1,\n", "y = 2\n", count=2)))
    out = run("train.ipynb", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("train.ipynb: cannot parse: cell 2, line ")


def test_a_notebook_of_another_language_has_nothing_to_lint(tmp_path):
    write(tmp_path / "train.ipynb", notebook(code("library(torch)\n", SOFTMAX_LOG + "\n"), language="R"))
    out = run("train.ipynb", cwd=tmp_path)
    assert (out.returncode, out.stderr) == (0, "")


def test_cached_findings_keep_their_cells(tmp_path):
    write(tmp_path / "train.ipynb", TRAIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    runs = [
        subprocess.run(
            [str(EXE), "--cache-dir", str(tmp_path / "cache"), "train.ipynb"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        for _ in range(2)
    ]
    assert runs[0].stdout == runs[1].stdout and "train.ipynb:cell 5:4:12:" in runs[1].stdout


def test_virtual_module_joins_code_cells_with_boundaries(tmp_path):
    source = read_source(str(write(tmp_path / "train.ipynb", TRAIN)))
    assert source.text.split(BOUNDARY + "\n")[1] == "probs = torch.softmax(x, dim=-1)\n"
    assert [cell.number for cell in source.cells] == [2, 3, 5]
    (tmp_path / "v3.ipynb").write_text('{"nbformat": 3}', encoding="utf-8")
    with pytest.raises(SourceError, match="nbformat 3"):
        read_source(str(tmp_path / "v3.ipynb"))


def test_a_fix_that_adds_an_import_line_to_an_earlier_cell_keeps_every_magic(tmp_path):
    # the import goes after the last import, in cell 1, which gains a line: the cells are still
    # told apart and each one's magics come back where they were
    path = write(
        tmp_path / "train.ipynb",
        notebook(
            code("%load_ext autoreload\n", "from torch import log, sigmoid, randn\n", "!nvidia-smi\n", "x = randn(3)", count=1),
            code("%time y = 1\n", "b = log(sigmoid(x))\n", "!echo done", count=2),
        ),
    )
    assert run("--fix", "train.ipynb", cwd=tmp_path).returncode == 0
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert [cell["source"] for cell in cells] == [
        [
            "%load_ext autoreload\n",
            "from torch import log, sigmoid, randn\n",
            "import torch.nn.functional as F\n",
            "!nvidia-smi\n",
            "x = randn(3)",
        ],
        ["%time y = 1\n", "b = F.logsigmoid(x)\n", "!echo done"],
    ]


def test_a_softmax_in_one_cell_feeding_kl_div_in_another_is_fixed(tmp_path):
    """A notebook's top-level names are the program's own (nothing imports a notebook), so a
    fix rewrites the softmax's one assignment in its cell as it would a function's local."""
    nb = notebook(
        code("import torch\n", "import torch.nn.functional as F\n", count=1),
        code(
            "s = torch.randn(4, 10, requires_grad=True)\n",
            "t = torch.randn(4, 10, requires_grad=True)\n",
            "p = F.softmax(t, dim=-1)\n",
            count=2,
        ),
        code('loss = F.kl_div(F.log_softmax(s, dim=-1), p, reduction="batchmean")\n', "loss.backward()", count=3),
    )
    (tmp_path / "distill.ipynb").write_text(json.dumps(nb, indent=1))
    out = run("--output-format", "concise", "distill.ipynb", cwd=tmp_path)
    assert out.stdout.splitlines()[0].startswith("distill.ipynb:cell 3:1:43: TNL101 ")
    assert out.stdout.splitlines()[0].endswith("(the fix makes `p` hold log-probabilities) [*]")
    assert run("--fix", "distill.ipynb", cwd=tmp_path).returncode == 0
    cells = ["".join(c["source"]) for c in json.loads((tmp_path / "distill.ipynb").read_text())["cells"]]
    assert "p = F.log_softmax(t, dim=-1)\n" in cells[1]
    assert cells[2].startswith('loss = F.kl_div(F.log_softmax(s, dim=-1), p, reduction="batchmean", log_target=True)\n')
    # the same code in a module: a global can be imported elsewhere, so its assignment stays
    source = "".join("".join(c["source"]) + "\n" for c in nb["cells"])
    (tmp_path / "distill.py").write_text(source)
    assert not run("--output-format", "concise", "distill.py", cwd=tmp_path).stdout.splitlines()[0].endswith("[*]")


def test_a_top_level_name_read_in_two_cells_keeps_its_assignment(tmp_path):
    nb = notebook(
        code(
            "import torch\n",
            "import torch.nn.functional as F\n",
            "x = torch.randn(4, 10, requires_grad=True)\n",
            "probs = F.softmax(x, dim=-1)\n",
            count=1,
        ),
        code("logp = torch.log(probs)\n", "print(probs.sum())\n", count=2),
    )
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb, indent=1))
    run("--fix", "nb.ipynb", cwd=tmp_path)
    cells = ["".join(c["source"]) for c in json.loads((tmp_path / "nb.ipynb").read_text())["cells"]]
    assert "probs = F.softmax(x, dim=-1)\n" in cells[0]  # a later cell still reads the probabilities
