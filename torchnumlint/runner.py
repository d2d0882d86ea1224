"""One run over paths: discover, read, index, lint or fix each file, collect what to report.

Each file is processed by `process_file`, a function of plain, picklable inputs, so a later
change can hand files to worker processes or a cache without touching the rest.

Files are processed project by project (`discovery.project_root`). When an enabled rule reads the
project index, the index of a project is built from all of that project's files, whichever of them
were passed (pre-commit passes only the staged ones): the files not passed are read for the index,
skipping any that cannot be read, and are never linted. Files with no project root above them are
one project made of exactly those files, and nothing else is read for them: without a marker there
is no telling where their project ends.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import traceback
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Type, Union

from torchnumlint.config import Config, Settings
from torchnumlint.discovery import discover, project_files, project_root
from torchnumlint.engine import ParseError, lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.findings import Finding
from torchnumlint.results import FileOutcome, Options, RunResult
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.rules.names import imports_torch
from torchnumlint.rules.base import Rule
from torchnumlint.source import SourceError, SourceFile, read_source, write_source


def process_file(
    source: SourceFile, rules: Sequence[Type[Rule]], index: ProjectIndex, options: Options
) -> FileOutcome:
    path = source.path
    outcome = FileOutcome()
    try:
        if not (options.fix or options.diff):
            outcome.findings = lint_text(path, source.text, rules, index, strict=bool(options.strict))
            return outcome
        result = fix_text(path, source.text, rules, index, unsafe=bool(options.unsafe_fixes), strict=bool(options.strict))
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


def run(
    paths: Sequence[str],
    settings: Union[Settings, Config],
    rules: Sequence[Type[Rule]] = (),
    options: Optional[Options] = None,
) -> RunResult:
    """Lint (or fix) `paths`. `settings` finds each file's config and rules; a plain `Config` with
    `rules` applies to every file."""
    if isinstance(settings, Config):
        settings = Settings.fixed(settings, rules)
    options = options or Options()
    result = RunResult()
    files, result.errors = discover(paths, settings)
    sources: List[SourceFile] = []
    for path in files:
        try:
            sources.append(read_source(path))
        except SourceError as exc:
            result.errors.append(f"{path}: {exc}")
    result.files = len(sources)
    unsafe = [_file_options(options, settings, s.path).unsafe_fixes for s in sources]
    result.unsafe_fixes = all(unsafe) if unsafe else bool(options.unsafe_fixes)
    roots: Dict[Path, Optional[Path]] = {}
    projects: Dict[Optional[Path], List[SourceFile]] = {}
    for source in sources:
        projects.setdefault(project_root(Path(os.path.abspath(source.path)).parent, roots), []).append(source)
    for root, members in projects.items():
        _run_project(root, members, settings, options, result)
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def _file_options(options: Options, settings: Settings, path: str) -> Options:
    """`options` with what the command line left open taken from the file's own config."""
    if options.unsafe_fixes is not None and options.strict is not None:
        return options
    config = settings.config_of(path)
    return dataclasses.replace(
        options,
        unsafe_fixes=config.unsafe_fixes if options.unsafe_fixes is None else options.unsafe_fixes,
        strict=config.strict if options.strict is None else options.strict,
    )


def _run_project(
    root: Optional[Path], members: List[SourceFile], settings: Settings, options: Options, result: RunResult
) -> None:
    """Lint or fix the files passed from one project against that project's index."""
    rules = {source.path: settings.rules_for(source.path) for source in members}
    # the whole project is read only when a passed file can hold a finding of a rule that reads
    # its facts (a `forward` for TNL301, an `autocast` for TNL302), or of a rule that sees what
    # the project's helpers produce (TNL103's `log(probs(z))` names no softmax: only the index
    # can tell): a pre-commit run on a file that has none of these costs no project walk
    needs_index = any(
        rule.needs_index and (rule.produced or rule.could_fire(source.text))
        for source in members
        if imports_torch(source.text)
        for rule in rules[source.path]
    )
    texts = [(source.path, source.text) for source in members]
    index = build_index(_project_texts(root, texts, settings)) if needs_index else ProjectIndex.empty()
    fixed_texts = {}
    findings: List[Finding] = []
    for source in members:
        outcome = process_file(source, rules[source.path], index, _file_options(options, settings, source.path))
        findings.extend(outcome.findings)
        result.errors.extend(outcome.errors)
        result.fixed += outcome.fixed
        if outcome.diff:
            result.diffs.append(outcome.diff)
        if outcome.text is not None:
            fixed_texts[source.path] = outcome.text
    del index  # the relint below builds the project's index again
    if needs_index and fixed_texts:
        final = [(path, fixed_texts.get(path, text)) for path, text in texts]
        strict = {path: bool(_file_options(options, settings, path).strict) for path, _ in texts}
        findings = _relint_cross_file(findings, root, final, rules, settings, strict)
    result.findings.extend(findings)


def _project_texts(root: Optional[Path], texts: List[Tuple[str, str]], settings: Settings) -> Iterator[Tuple[str, str]]:
    """(path, text) of every file of the project at `root`: `texts` for the files passed, the
    others read from disk one at a time. Their paths take the form the passed files have
    (relative to the working folder, or absolute), since findings name them."""
    yield from texts
    if root is None:
        return
    passed = {os.path.realpath(path) for path, _ in texts}
    top = str(root) if os.path.isabs(texts[0][0]) else os.path.relpath(root)
    for path in project_files(top, settings):
        if os.path.realpath(path) in passed:
            continue
        try:
            yield path, read_source(path).text
        except SourceError:
            pass  # not being linted: it just adds no facts


def _relint_cross_file(findings, root, final, rules, settings, strict) -> List[Finding]:
    """Fixes in one file change what rules that read the project index report in another (a
    Function given `custom_fwd` is safe wherever it is called): report those rules' findings
    against the project as fixed, not as it was."""
    fresh = build_index(_project_texts(root, final, settings))
    codes = {rule.code for chosen in rules.values() for rule in chosen if rule.needs_index}
    kept = [f for f in findings if f.code not in codes]
    for path, text in final:
        try:
            kept.extend(lint_text(path, text, [r for r in rules[path] if r.needs_index], fresh, strict=strict[path]))
        except ParseError:
            pass  # already reported for this file
    return kept
