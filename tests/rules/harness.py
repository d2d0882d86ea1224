"""The one table-driven harness every rule's tests use.

A rule's tests are two tables: `Flagged` cases (source, the lines of its findings, the exact text
after `--fix --unsafe-fixes`, and whether that fix is SAFE) and `Silent` look-alikes. `check`
runs a case through the real engine and fixer and asserts everything a user relies on:

- exactly the expected findings, all of the rule's code;
- the pre-filter keeps the source (it never loses a finding);
- the fix gives the pinned text, which parses, lints clean for the rule and is stable under a
  second `--fix`;
- safety gating: without `--unsafe-fixes` only a SAFE fix is applied;
- a look-alike gives no finding;
- with `together`, the rules a user's run enables with it: a site two of them recognise is still
  reported once, by the rule under test, and a look-alike is silent for all of them;
- with `message`, a phrase every finding's message contains (the evidence it names, "strict mode");
- with `enabled`, rules enabled in every run of the case (TNL900 judges the noqa codes of enabled
  rules only), whose findings must all be suppressed.

A `Project` case is several files linted as one project (the index built from all of them, as a
run over the folder builds it): the findings expected per file, the exact fixed text per file,
with the same checks per file as a `Flagged` case (a file with no expected line is a look-alike).
Cross-file facts (a helper, a model or a GradScaler defined in another module) are tested so.

`params(code, flagged, silent, projects)` turns the tables into pytest parameters with readable ids.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence, Tuple

import pytest

from torchnumlint.engine import candidate_rules, lint_text
from torchnumlint.findings import Safety
from torchnumlint.fixes import fix_text
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.rules.registry import registry


@dataclass(frozen=True)
class Flagged:
    """`source` must give findings on `lines` (1-based, after dedent); `fixed` is the exact text
    after `--fix --unsafe-fixes` (None: no fix is offered); `safe` whether plain `--fix` applies
    it (None: as the rule's safety says). `strict` runs in strict mode; `path` names the file;
    `together` other rules enabled with it, which must not report the same findings; `message` a
    phrase every finding's message contains; `enabled` rules on in every run of the case."""

    source: str
    lines: Tuple[int, ...]
    fixed: Optional[str] = None
    safe: Optional[bool] = None
    strict: bool = False
    path: str = "example.py"
    together: Tuple[str, ...] = ()
    message: Optional[str] = None
    enabled: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Silent:
    """A look-alike: `source` must give no finding of the rule, nor of the rules `together` with it."""

    source: str
    strict: bool = False
    path: str = "example.py"
    together: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Project:
    """Several files linted as one project: `files` maps each path to its source; `lines` the
    1-based lines of the findings per path (a path not named: none); `fixed` the exact text per
    path after `--fix --unsafe-fixes` (a path not named: unchanged, no fix offered); `safe`
    whether plain `--fix` applies the fixes (None: as the rule's safety says); `message` a
    phrase every finding's message contains."""

    files: Mapping[str, str]
    lines: Mapping[str, Tuple[int, ...]] = field(default_factory=dict)
    fixed: Mapping[str, str] = field(default_factory=dict)
    safe: Optional[bool] = None
    strict: bool = False
    message: Optional[str] = None


def _rule(code: str):
    return registry()[code]


def findings(code: str, source: str, strict: bool = False, path: str = "example.py", together: Sequence[str] = ()):
    """The findings of `code` and of the rules `together` with it on dedented `source`."""
    rules = [_rule(code)] + [_rule(other) for other in together if other != code]
    return lint_text(path, textwrap.dedent(source), rules, strict=strict)


def check_flagged(code: str, case: Flagged) -> None:
    rule = _rule(code)
    rules = [rule] + [_rule(other) for other in case.enabled]
    source = textwrap.dedent(case.source)
    fixed = textwrap.dedent(case.fixed) if case.fixed is not None else None
    found = lint_text(case.path, source, rules, strict=case.strict)
    assert sorted(f.line for f in found) == sorted(case.lines), [(f.line, f.message) for f in found]
    assert all(f.code == code for f in found)
    if case.message is not None:
        assert all(case.message in f.message for f in found), [f.message for f in found]
    if case.together:
        shared = findings(code, source, case.strict, case.path, case.together)
        assert sorted((f.code, f.line) for f in shared) == sorted((code, line) for line in case.lines), [(f.code, f.line) for f in shared]
    assert candidate_rules(source, [rule]) == [rule], "the pre-filter drops a flagged source"

    result = fix_text(case.path, source, rules, unsafe=True, strict=case.strict)
    assert not result.errors
    assert result.text == (fixed if fixed is not None else source)
    if fixed is None:
        assert all(f.fix is None for f in found), "a fix is offered"
        return
    ast.parse(result.text)
    assert lint_text(case.path, result.text, rules, strict=case.strict) == [], "the fixed text is still flagged"
    again = fix_text(case.path, result.text, rules, unsafe=True, strict=case.strict)
    assert again.text == result.text, "a second --fix changes the text"

    safe = case.safe if case.safe is not None else rule.safety is Safety.SAFE
    plain = fix_text(case.path, source, rules, unsafe=False, strict=case.strict).text
    assert plain == (fixed if safe else source), "plain --fix applied an unsafe fix" if not safe else "a safe fix needs --unsafe-fixes"
    fixes = [f.fix for f in found if f.fix is not None]
    assert fixes and all((fix.safety is Safety.SAFE) == safe for fix in fixes)


def check_silent(code: str, case: Silent) -> None:
    found = findings(code, case.source, case.strict, case.path, case.together)
    assert found == [], [(f.line, f.message) for f in found]


def check_project(code: str, case: Project) -> None:
    rule = _rule(code)
    sources: Dict[str, str] = {path: textwrap.dedent(text) for path, text in case.files.items()}
    unknown = (set(case.lines) | set(case.fixed)) - set(sources)
    assert not unknown, f"expected findings or fixes in files the project lacks: {sorted(unknown)}"
    index = build_index(sources.items())
    index.summaries.buffers.update(sources)  # the files are not on disk: callers are read from here
    safe = case.safe if case.safe is not None else rule.safety is Safety.SAFE
    for path, source in sources.items():
        lines = case.lines.get(path, ())
        found = lint_text(path, source, [rule], index=index, strict=case.strict)
        assert sorted(f.line for f in found) == sorted(lines), (path, [(f.line, f.message) for f in found])
        assert all(f.code == code for f in found)
        if case.message is not None:
            assert all(case.message in f.message for f in found), [f.message for f in found]
        if lines:
            assert candidate_rules(source, [rule], index) == [rule], f"the pre-filter drops {path}"
        fixed = textwrap.dedent(case.fixed[path]) if path in case.fixed else None
        result = fix_text(path, source, [rule], index=index, unsafe=True, strict=case.strict)
        assert not result.errors
        assert result.text == (fixed if fixed is not None else source), path
        if fixed is None:
            assert all(f.fix is None for f in found), f"{path}: a fix is offered"
            continue
        ast.parse(result.text)
        now: ProjectIndex = index.with_file(path, result.text)
        assert lint_text(path, result.text, [rule], index=now, strict=case.strict) == [], f"{path}: still flagged"
        again = fix_text(path, result.text, [rule], index=now, unsafe=True, strict=case.strict)
        assert again.text == result.text, f"{path}: a second --fix changes the text"
        plain = fix_text(path, source, [rule], index=index, unsafe=False, strict=case.strict).text
        assert plain == (fixed if safe else source), f"{path}: safety gating"


def check(code: str, case) -> None:
    """Run one case of any kind."""
    if isinstance(case, Flagged):
        check_flagged(code, case)
    elif isinstance(case, Project):
        check_project(code, case)
    else:
        check_silent(code, case)


def params(code: str, flagged: Sequence[Flagged] = (), silent: Sequence[Silent] = (), projects: Sequence[Project] = ()):
    """pytest parameters `(code, case)` for `@pytest.mark.parametrize("code, case", ...)`."""
    cases = [pytest.param(code, c, id=f"{code}-flagged-{i}") for i, c in enumerate(flagged)]
    cases += [pytest.param(code, c, id=f"{code}-silent-{i}") for i, c in enumerate(silent)]
    cases += [pytest.param(code, c, id=f"{code}-project-{i}") for i, c in enumerate(projects)]
    return cases
