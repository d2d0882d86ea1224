"""Any input, a clear answer: statements beyond the parsers' reach are skipped with a warning that
names them, the rest of the file is linted, and nothing crashes the process.

The huge inputs run in a subprocess (the CLI), so a regression that crashes the interpreter (a
10,000-term sum used to segfault LibCST's native parser) fails a test instead of killing pytest.
"""

import ast
import subprocess
import sys

import pytest

from torchnumlint import prepass
from torchnumlint.engine import ParseError, lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.rules.registry import registry

RULES = [rule for rule in registry().values() if rule.default]
HEAD = "import torch\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n\n"
TAIL = "\n\ndef g(x):\n    return torch.log(torch.sigmoid(x))\n"


def _cli(tmp_path, body, *args):
    path = tmp_path / "big.py"
    path.write_text(HEAD + body + TAIL)
    done = subprocess.run(
        [sys.executable, "-m", "torchnumlint", "--no-cache", "--output-format", "text", *args, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return path, done


def _terms(n, op=" + "):
    return op.join(f"x{i}" for i in range(n))


def test_a_1000_term_sum_is_analysed_whole(tmp_path):
    path, done = _cli(tmp_path, f"y = {_terms(1000)}")
    assert done.returncode == 1, done.stderr
    assert f"{path}:4:12: TNL103" in done.stdout and f"{path}:9:12: TNL104" in done.stdout
    assert "skipped" not in done.stdout + done.stderr


@pytest.mark.parametrize("op", [" + ", " and "])
def test_a_10000_term_expression_is_skipped_by_name_and_the_rest_linted(tmp_path, op):
    path, done = _cli(tmp_path, f"y = {_terms(10_000, op)}")
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # 2: a file had an error; -11 was a segfault
    assert f"{path}:4:12: TNL103" in done.stdout and f"{path}:9:12: TNL104" in done.stdout
    assert f"{path}: line 6: statement nested too deeply to analyse" in done.stdout + done.stderr


def test_a_statement_libcst_cannot_parse_is_skipped_and_the_rest_linted(tmp_path):
    pieces = " ".join(f"'s{i}'" for i in range(10_000))  # valid Python; LibCST's parser gives up
    path, done = _cli(tmp_path, f"y = ({pieces})")
    assert f"{path}:4:12: TNL103" in done.stdout and f"{path}:9:12: TNL104" in done.stdout
    assert f"{path}: line 6: statement beyond LibCST's parser; skipped" in done.stdout + done.stderr


def test_fix_leaves_a_skipped_statement_byte_identical_and_fixes_the_rest(tmp_path):
    deep = "    z = " + _terms(3000) + "\n"
    text = HEAD.replace("    return", deep + "    return") + TAIL
    result = fix_text("big.py", text, RULES, unsafe=True)
    assert deep in result.text and "log_softmax" in result.text and "logsigmoid" in result.text
    assert result.errors == ["line 4: statement nested too deeply to analyse (depth 3001 > 1500); skipped, the rest of the file is linted"]
    with prepass.recursion_limit():
        ast.parse(result.text)


def test_a_file_whose_analysis_runs_past_the_time_limit_is_a_clear_error():
    text = HEAD + "".join(f"y{i} = torch.log(torch.sigmoid(x{i}))\n" for i in range(500)) + TAIL
    with pytest.raises(ParseError, match=r"^analysis stopped after 0 s; the file is not linted$"):
        lint_text("slow.py", text, RULES, time_limit=0.0)


def test_a_file_nested_beyond_cpythons_parser_is_a_clear_error_not_a_crash(tmp_path):
    code = (
        "import sys\nsys.path.insert(0, %r)\n"
        "from torchnumlint.engine import ParseError, lint_text\n"
        "text = 'import torch\\ny = ' + '-' * 400000 + 'x\\n'\n"
        "try:\n    lint_text('u.py', text, [])\nexcept ParseError as exc:\n    print('ParseError', exc)\n"
    ) % str(__import__("pathlib").Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ParseError ")


@pytest.mark.parametrize(
    "text, spans, masked",
    [
        ("a = 1\r\nb = (\r\n  2)\r\nc = 3\r\n", [(7, 18)], "a = 1\r\npass \r\n#   \r\nc = 3\r\n"),
        ("x=(\n1)\n", [(0, 6)], "0  \n# \n"),  # a first line too short for `pass`
        ("x = (\n 1)  # c\n", [(0, 9)], "pass \n     # c\n"),  # a last line that goes on: blanks
        ("x = (\n\n 1)", [(0, 10)], "pass \n\n#  "),  # an empty line stays empty
        ("if t: y = 'é' + 1; z = 2\n", [(6, 17)], "if t: pass       ; z = 2\n"),
    ],
)
def test_masking_keeps_every_offset_and_line_break(text, spans, masked):
    assert prepass.mask(text, spans) == masked
    assert len(masked) == len(text)
    ast.parse(masked)


@pytest.mark.parametrize("tail", ["", "\n", "\n   \n", "\n    \n  \n"])
def test_a_masked_last_statement_reprints_exactly(tail):
    """LibCST keeps one of several whitespace-only lines at the end of a file: a masked last
    statement must not end the file with them, or every offset after it is off."""
    import libcst

    text = "import torch\n\n\ndef f(x):\n    h = torch.relu(x)\n    return h\n" + tail
    tree = ast.parse(text)
    masked = prepass.mask(text, [prepass.Lines(text).span(tree.body[-1])])
    assert libcst.parse_module(masked).code == masked


def test_statement_spans_count_characters_not_utf8_bytes():
    text = "s = 'ééé'; t = 1\n@dec\ndef f():\n    pass\n"
    tree = ast.parse(text)
    lines = prepass.Lines(text)
    assert [text[slice(*lines.span(stmt))] for stmt in tree.body] == ["s = 'ééé'", "t = 1", "@dec\ndef f():\n    pass"]
