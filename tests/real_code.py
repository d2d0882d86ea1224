"""Real code for the tests that need it: files of the installed torch sources (always present
where the tests run), each with one rule example split around it.

torch's sources hold almost no findings (1 in 240 files), so each file gets a rule example:
its module-level lines (imports, assignments) at the file's top, after any `__future__` import,
and its functions and classes at the end, so findings sit among real code.
"""

import os
import textwrap

import torch

from torchnumlint.rules.registry import registry
from torchnumlint.source import SourceError, read_source

EXAMPLES = [example.bad for rule in registry().values() for example in rule.examples]


def _small_torch_files():
    top = os.path.dirname(torch.__file__)
    return sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(top)
        for name in names
        if name.endswith(".py") and os.path.getsize(os.path.join(folder, name)) < 60_000
    )


def torch_files(count):
    """`count` files of the installed torch, spread over it (a fixed choice), under 60 kB."""
    files = _small_torch_files()
    step = max(1, len(files) // count)
    return files[::step][:count]


def docstring_share(text):
    """The share of `text` inside triple-quoted strings (docstrings, mostly)."""
    pieces = text.split('"""')
    return sum(len(p) for p in pieces[1::2]) / max(len(text), 1)


def class_count(text):
    return text.count("\nclass ")


def heaviest(count, score):
    """The `count` torch files under 60 kB that `score` (of the text) ranks highest: where a
    pre-pass decision is hardest (prose full of rule words, classes whose methods link)."""
    scored = []
    for path in _small_torch_files():
        try:
            scored.append((-score(read_source(path).text), path))
        except SourceError:
            continue
    return [path for _, path in sorted(scored)[:count]]


def with_example(text, example):
    """`text` with `example`'s module-level lines at its top and its functions and classes at its end."""
    head, tail = [], []
    for block in textwrap.dedent(example).strip("\n").split("\n\n\n"):
        (tail if block.lstrip().startswith(("def ", "class ", "@", "async ")) else head).append(block)
    lines = text.rstrip("\n").split("\n")
    top = max([i + 1 for i, line in enumerate(lines) if line.startswith("from __future__")], default=0)
    body = lines[:top] + head + lines[top:]
    return "\n".join(body) + "\n\n\n" + "\n\n\n".join(tail) + "\n"


def real_texts(count, files=None, first=0):
    """(path, text) of `count` torch files (fewer: those that cannot be read), or of `files`, each
    with an example (from the `first`-th on)."""
    out = []
    for number, path in enumerate(torch_files(count) if files is None else files):
        try:
            text = read_source(path).text
        except SourceError:
            continue
        out.append((path, with_example(text, EXAMPLES[(first + number) % len(EXAMPLES)])))
    return out
