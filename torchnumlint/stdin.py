"""`torchnumlint - --stdin-filename PATH`: lint (or fix) source given on standard input as if it
were the file PATH, the way editors and formatters' pipelines call ruff.

PATH decides everything a file's path decides: its configuration (the nearest pyproject.toml
above it), its per-file ignores, whether it is a notebook, and its project, whose other files
give the project facts (the text given stands in for PATH's own file). PATH need not exist.
Nothing is written and the cache is not used: the text given is not the file on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Tuple

from torchnumlint import runner, suppression
from torchnumlint.config import Settings
from torchnumlint.discovery import project_files, project_root
from torchnumlint.index import ProjectIndex, index_file
from torchnumlint.results import Options, RunResult
from torchnumlint.source import SourceError, decode, encode, read_source


def run_stdin(raw: bytes, path: str, settings: Settings, options: Options) -> Tuple[RunResult, Optional[bytes]]:
    """The run's result, and with `options.fix` the fixed source as bytes (the text given when
    nothing changed; None when it could not be read). Under `force_exclude`, a PATH the excludes
    or a .gitignore leave out is not linted (ruff's reading): no finding, the text given back as it
    came, as pre-commit and editors expect of an excluded file."""
    if options.force_exclude and path != "-" and suppression.scope(path, settings).excluded:
        return RunResult(found=0), raw if options.fix else None
    result = RunResult(found=1)
    try:
        source = decode(path, raw)
    except SourceError as exc:
        result.errors.append(f"{path}: {exc}")
        return result, None
    result.files = 1
    rules = settings.rules_for(path)
    options = runner.file_options(options, settings, path).replace(write=False, cache=False)
    index = _index(path, source.text, settings) if runner.reads_project_index(source.text, rules) else ProjectIndex.empty()
    outcome = runner.process_file(source, rules, index, options)
    result.findings = sorted(outcome.findings, key=lambda f: f.sort_key)
    result.errors = outcome.errors
    result.fixed = outcome.fixed
    if outcome.fixed_codes:
        result.fixed_by_file[path] = outcome.fixed_codes
    result.diffs = [outcome.diff] if outcome.diff else []
    result.unsafe_fixes = bool(options.unsafe_fixes)
    fixed = encode(source, outcome.text) if outcome.text is not None else raw
    # the report's source lines: the text given (after --fix, the fixed text the findings refer to)
    result.sources[path] = decode(path, fixed) if options.fix else source
    return result, fixed if options.fix else None


def _index(path: str, text: str, settings: Settings) -> ProjectIndex:
    """The facts of PATH's project, with `text` read for PATH itself."""
    root = project_root(Path(os.path.abspath(path)).parent, {})
    me = os.path.realpath(path)
    index = ProjectIndex.empty()
    for other in project_files(str(root), settings) if root is not None else ():
        if os.path.realpath(other) == me:
            continue
        try:
            index.absorb(index_file(other, read_source(other).text))
        except SourceError:
            continue  # as in a run over files: an unreadable file adds no facts
    index.absorb(index_file(path, text))
    index.finalize()
    return index
