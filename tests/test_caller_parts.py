"""A caller's file is parsed only in the part that holds the call (`rules/callers._part_of`: its
top-level group, the other functions and classes masked): the findings judged at callers in other
files, and their messages citing `file:line`, must be those of a whole-file parse.

The projects: every multi-file case of the rule tests (a helper and its callers), each caller
file set inside a real file of the installed torch sources (`tests/real_code.py`: its imports at
the top, its functions and classes after the real ones), so a caller's file holds many groups
its call does not reach, and all rules run on every file, strict.
"""

import importlib
import re
import pkgutil
import textwrap

import pytest

import tests.rules
from tests.real_code import torch_files, with_example
from torchnumlint.engine import lint_text
from torchnumlint.index import build_index
from torchnumlint.rules import callers
from torchnumlint.rules.registry import all_rules
from torchnumlint.source import read_source
from tests.rules.harness import Project


def _projects():
    """The `Project` cases of the rule tests, in a fixed order."""
    found = []
    for info in sorted(pkgutil.iter_modules(tests.rules.__path__), key=lambda m: m.name):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"tests.rules.{info.name}")
        for value in vars(module).values():
            for case in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(case, Project) and case not in found:
                    found.append(case)
    return found


def _real_sources(case, reals):
    """The case's files, each caller (a file with no finding expected) inside a real torch file."""
    sources = {}
    for path, text in case.files.items():
        text = textwrap.dedent(text)
        sources[path] = text if path in case.lines else with_example(next(reals), text)
    return sources


def _lint_all(projects):
    rules = all_rules()
    found = []
    for sources in projects:
        index = build_index(sources.items())
        index.summaries.buffers.update(sources)  # the files are not on disk: callers are read from here
        for path, text in sorted(sources.items()):
            found.append((path, [(f.line, f.col, f.code, f.message) for f in lint_text(path, text, rules, index=index, strict=True)]))
    return found


@pytest.fixture
def parts_parsed(monkeypatch):
    """The parts of caller files parsed (`callers._parsed`), none served from an earlier test."""
    callers._parsed.cache_clear()
    callers._parts.cache_clear()
    parsed = []
    real = callers._parsed

    def counted(path, text, part):
        parsed.append(part)
        return real(path, text, part)

    monkeypatch.setattr(callers, "_parsed", counted)
    yield parsed
    real.cache_clear()
    callers._parts.cache_clear()


def test_a_callers_part_judges_as_its_whole_file(parts_parsed, monkeypatch):
    cases = _projects()
    files = iter(torch_files(200))
    reals = (read_source(path).text for path in files)
    projects = [_real_sources(case, reals) for case in cases]
    partial = _lint_all(projects)
    parts = [part for part in parts_parsed if part != callers.WHOLE]
    monkeypatch.setattr(callers, "_part_of", lambda path, text, line, col: callers.WHOLE)
    assert _lint_all(projects) == partial
    cited = sum(bool(re.search(r"\w\.py:\d+", message)) for _, found in partial for *_, message in found)
    assert len(cases) >= 60 and len(parts) >= 30 and cited >= 25, (len(cases), len(parts), cited)  # 70, 37, 33 when written
