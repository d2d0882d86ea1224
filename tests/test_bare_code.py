"""What the candidate tests read of a statement (`bare_code.py`): its code without docstrings and
comments, every other string whole, and comments that say noqa kept."""

import ast
import textwrap

import pytest

from torchnumlint import prepass
from torchnumlint.bare_code import bare_code


def _bare(code):
    """The bare code of each top-level statement of `code`, joined by blank lines."""
    text = textwrap.dedent(code).lstrip("\n")
    tree = ast.parse(text)
    lines = prepass.Lines(text)
    return "\n\n".join(bare_code(node, *lines.span(node), lines) for node in tree.body)


def test_docstrings_at_any_depth_and_comments_are_cut():
    code = '''
        def f(x):
            """Takes the log of exp(x) / sum."""
            y = x + 1  # divides by the sum: x / s
            if y:
                """a bare string in a block"""
                # a comment alone on its line, with log in it
                return y
            return x
    '''
    bare = _bare(code)
    assert "log" not in bare and "exp" not in bare and "/" not in bare and "sum" not in bare
    assert "y = x + 1" in bare and "return y" in bare and "return x" in bare


def test_a_module_level_bare_string_is_cut_whole():
    assert _bare('x = 1\n"""exp / log"""\n').split("\n\n") == ["x = 1", ""]


@pytest.mark.parametrize(
    "code",
    [
        'y = x.masked_fill(m, float("-inf"))\n',
        'y = x.to(dtype="float16")\n',
        'loss = F.kl_div(p, q, reduction="batchmean")\n',
        'trainer = Trainer(precision="16-mixed")\n',
        'path = "a/b/c" + "#not a comment / sum"\n',
        "s = f'{x / y:#x} # still the string'\n",
        "z = w ** (1 / 2)\n",
    ],
)
def test_code_strings_and_hashes_inside_them_are_kept(code):
    assert _bare(code) == code.rstrip("\n")


def test_a_hash_between_the_pieces_of_a_concatenated_string_is_kept():
    """`ast` spans the pieces as one constant: what it cannot place is kept (keeping only keeps more)."""
    code = 'name = ("a"  # exp\n        "b")\n'
    assert _bare(code) == code.rstrip("\n")


def test_comments_that_say_noqa_are_kept():
    code = "def f(x, n):\n    y = x / n  # noqa: TNL201\n    z = y  # NOQA\n    w = z  # a plain remark\n    return w\n"
    assert _bare(code) == "def f(x, n):\n    y = x / n  # noqa: TNL201\n    z = y  # NOQA\n    w = z  \n    return w"


def test_positions_of_non_ascii_text_are_characters():
    code = 'def f(x):\n    """é exp"""\n    y = "é" + x  # é log\n    return y\n'
    assert _bare(code) == 'def f(x):\n    \n    y = "é" + x  \n    return y'


def test_unpacking_stars_are_cut_and_powers_kept():
    code = "def f(x, *args, ** kwargs):\n    y = g(x, **kwargs, **{**extra, 'a': 1})\n    return y ** 2 + x**0.5 + h(**(opts), **{**(d)})\n"
    bare = "def f(x, *args,  kwargs):\n    y = g(x, kwargs, {extra, 'a': 1})\n    return y ** 2 + x**0.5 + h((opts), {**(d)})"
    assert _bare(code) == bare  # a parenthesised dict entry keeps its `**`: keeping only keeps more
