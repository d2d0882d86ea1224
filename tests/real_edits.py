"""Edits a user makes to real code, drawn at random (from a seeded `random.Random`), for the tests
that follow the project facts across edits (`tests/test_moves.py`, `test_one_file_tables.py`,
`test_server_facts.py`). Each gives the edited text, or None where the text offers no place."""

import ast
import random
from typing import Optional

HELPER = "\n\ndef added_helper(x):\n    return x.softmax(-1)\n"
MODULE = "\n\nclass AddedBlock(nn.Module):\n    def forward(self, x):\n        return x * x\n"


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def line_at_top(text: str, rng: random.Random) -> Optional[str]:
    """A comment line at the top: every line of the file moves."""
    return "# a note\n" + text


def comment_anywhere(text: str, rng: random.Random) -> Optional[str]:
    """A comment line at a line drawn at random: every line below it moves."""
    lines = text.split("\n")
    for _ in range(20):
        at = rng.randrange(len(lines) + 1)
        edited = "\n".join(lines[:at] + ["# a note"] + lines[at:])
        if parses(edited):  # not after a line that ends in a backslash
            return edited
    return None


def inside_function(text: str, rng: random.Random) -> Optional[str]:
    """A statement before the first statement of a function drawn at random."""
    lines = text.split("\n")
    found = [
        node.body[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body[0].lineno > node.lineno
    ]
    if not found:
        return None
    first = rng.choice(found)
    at = first.lineno - 1
    return "\n".join(lines[:at] + [" " * first.col_offset + "edited_here = 0"] + lines[at:])


def helper_added(text: str, rng: random.Random) -> Optional[str]:
    """A module-level helper returning a softmax, at the end."""
    return text + HELPER


# The edits that move positions only, and those that change what the index holds.
MOVES = (line_at_top, comment_anywhere)
CHANGES = (inside_function, helper_added)
