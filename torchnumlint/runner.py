"""One run over paths: discover, read, index, lint or fix each file, collect what to report.

Each file is processed by `process_file`, a function of plain, picklable inputs, so a later
change can hand files to worker processes or a cache without touching the rest.
"""

from __future__ import annotations

import difflib
import traceback
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Type

from torchnumlint.config import Config, ignored_for
from torchnumlint.discovery import discover
from torchnumlint.engine import ParseError, fix_text, lint_text
from torchnumlint.findings import Finding
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.rules.base import Rule
from torchnumlint.source import SourceError, SourceFile, read_source, write_source


@dataclass
class Options:
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False


@dataclass
class FileOutcome:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""
    text: Optional[str] = None  # the fixed text, once written


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fixed: int = 0
    diffs: List[str] = field(default_factory=list)
    files: int = 0


def _rules_for(path: str, rules: Sequence[Type[Rule]], config: Config) -> List[Type[Rule]]:
    ignored = ignored_for(config, path)
    if not ignored:
        return list(rules)
    return [r for r in rules if not any(r.code.startswith(s) or s.upper() == "ALL" for s in ignored)]


def process_file(
    source: SourceFile, rules: Sequence[Type[Rule]], index: ProjectIndex, options: Options
) -> FileOutcome:
    path = source.path
    outcome = FileOutcome()
    try:
        if not (options.fix or options.diff):
            outcome.findings = lint_text(path, source.text, rules, index)
            return outcome
        result = fix_text(path, source.text, rules, index, unsafe=options.unsafe_fixes)
    except ParseError as exc:
        outcome.errors.append(f"{path}: cannot parse: {exc}")
        return outcome
    except Exception as exc:  # a bug in torchnumlint: say so, keep going with other files
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        outcome.errors.append(f"{path}: internal error in torchnumlint (please report it): {detail}")
        return outcome
    outcome.findings = result.findings
    outcome.errors.extend(f"{path}: {message}" for message in result.errors)
    if result.text != source.text:
        if options.diff:
            outcome.diff = unified_diff(path, source.text, result.text)
        else:
            try:
                write_source(source, result.text)
                outcome.fixed = result.applied
                outcome.text = result.text
            except SourceError as exc:
                outcome.errors.append(f"{path}: {exc}")
    return outcome


def unified_diff(path: str, old: str, new: str) -> str:
    """A patch that `patch` applies, with the marker for a last line without a newline."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
    )
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def run(paths: Sequence[str], config: Config, rules: Sequence[Type[Rule]], options: Options) -> RunResult:
    result = RunResult()
    files, result.errors = discover(paths, config)
    sources: List[SourceFile] = []
    for path in files:
        try:
            sources.append(read_source(path))
        except SourceError as exc:
            result.errors.append(f"{path}: {exc}")
    result.files = len(sources)
    index_rules = [rule for rule in rules if rule.needs_index]
    index = build_index((s.path, s.text) for s in sources) if index_rules else ProjectIndex.empty()
    fixed_texts = {}
    for source in sources:
        outcome = process_file(source, _rules_for(source.path, rules, config), index, options)
        result.findings.extend(outcome.findings)
        result.errors.extend(outcome.errors)
        result.fixed += outcome.fixed
        if outcome.diff:
            result.diffs.append(outcome.diff)
        if outcome.text is not None:
            fixed_texts[source.path] = outcome.text
    if index_rules and fixed_texts:
        result.findings = _relint_cross_file(result.findings, sources, fixed_texts, index_rules, config)
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def _relint_cross_file(findings, sources, fixed_texts, index_rules, config) -> List[Finding]:
    """Fixes in one file change what rules that read the project index report in another (a
    Function given `custom_fwd` is safe wherever it is called): report those rules' findings
    against the project as fixed, not as it was."""
    final = [(s.path, fixed_texts.get(s.path, s.text)) for s in sources]
    fresh = build_index(final)
    codes = {rule.code for rule in index_rules}
    kept = [f for f in findings if f.code not in codes]
    for path, text in final:
        try:
            kept.extend(lint_text(path, text, _rules_for(path, index_rules, config), fresh))
        except ParseError:
            pass  # already reported for this file
    return kept
