"""The pre-pass loses no finding on real code: files of the installed torch sources (always
present where the tests run), linted with LibCST given only the statements `candidates.py` keeps
and given the whole file, must give the same findings, fixes included.

The rules' own examples (`tests/rules/test_examples.py`) are small; real files are where a
statement's finding depends on another statement (aliases, helpers, call sites, base classes).
torch's sources hold almost no findings (1 in 240 files), so each file also gets one rule
example appended, so that findings sit among real code and the comparison is not vacuous.
"""

import os
import textwrap

import torch

from torchnumlint.engine import ParseError, lint_text
from torchnumlint.rules.registry import registry
from torchnumlint.source import SourceError, read_source

RULES = list(registry().values())  # every rule, default or not
SAMPLE = 120
EXAMPLES = [example.bad for rule in RULES for example in rule.examples]


def _sample():
    top = os.path.dirname(torch.__file__)
    files = sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(top)
        for name in names
        if name.endswith(".py") and os.path.getsize(os.path.join(folder, name)) < 60_000
    )
    step = max(1, len(files) // SAMPLE)
    return files[::step][:SAMPLE]


def _with_example(text, example):
    """`text` with `example`'s module-level lines (imports, assignments) at its top and its
    functions and classes at its end, so the two halves are apart, as in real files."""
    head, tail = [], []
    for block in textwrap.dedent(example).strip("\n").split("\n\n\n"):
        (tail if block.lstrip().startswith(("def ", "class ", "@", "async ")) else head).append(block)
    lines = text.rstrip("\n").split("\n")
    top = max([i + 1 for i, line in enumerate(lines) if line.startswith("from __future__")], default=0)
    body = lines[:top] + head + lines[top:]
    return "\n".join(body) + "\n\n\n" + "\n\n\n".join(tail) + "\n"


def _findings(path, text, partial):
    try:
        return [(f.line, f.col, f.code, f.message, f.fix) for f in lint_text(path, text, RULES, partial=partial)]
    except ParseError as exc:
        return str(exc)


def test_partial_parsing_gives_the_findings_of_a_full_parse_on_real_files():
    compared = findings = 0
    for number, path in enumerate(_sample()):
        try:
            text = read_source(path).text
        except SourceError:
            continue
        text = _with_example(text, EXAMPLES[number % len(EXAMPLES)])
        whole = _findings(path, text, partial=False)
        assert _findings(path, text, partial=True) == whole, path
        compared += 1
        findings += len(whole) if isinstance(whole, list) else 0
    assert compared >= SAMPLE * 0.9 and findings >= SAMPLE // 2  # not a vacuous comparison
