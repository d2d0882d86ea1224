"""One run over paths: discover, index, lint or fix each file, collect what to report.

Each file is processed by `process_file`, a function of plain, picklable inputs; `run` hands it
to worker processes (`workers.py`, `Options.jobs`) and keeps what it gave in the cache
(`cache.py`, `Options.cache`). Output does not depend on either: results are put back in the
order a serial run gives, and a cached result is the result.

Files are processed project by project (`discovery.project_root`). When an enabled rule reads the
project index, the index of a project is built from all of that project's files, whichever of them
were passed (pre-commit passes only the staged ones): the files not passed are read for the index,
skipping any that cannot be read, and are never linted. Files with no project root above them are
one project made of exactly those files, and nothing else is read for them: without a marker there
is no telling where their project ends.

Sources are streamed: the parent reads a file only to know its digest (when the cache's manifest
cannot vouch for it) and to decide whether the project index is needed, and keeps neither; the
worker that lints a file reads it again. With the cache, a file whose entry is valid is never
parsed, and a run where every entry is valid never imports the engine (nor libcst).

A cache entry records whether the file's result read the project index; if it did, it holds the
project's fingerprint (the digests of the facts of the files that can hold any, `fingerprint`)
and the questions its rules asked of the facts with their answers' digests (`fact_reads.py`). A
run whose fingerprint is the same uses it as it is (an edit that changes no fact: a comment, a
body that returns the same kinds); one whose fingerprint differs asks the entry's questions of
its own index and uses it when every answer is the same (then stores it under the new
fingerprint): an edit that adds a helper re-lints the files that name it. A file's facts are
cached by content in the project's one pack (`cache.py`). A run over part of a project (pre-commit)
stores the project's finalized tables (`project_tables.py`) and its file list (`listing.py`); the
next such run reads those and decodes only the facts its lint asks for, unless an edit since
changed what they hold in more than positions (a line added above a class moves it: that is
mapped, `moves.py`; a class or helper added, a file added or deleted: then it builds the whole
index, as before, and stores new tables).
"""

from __future__ import annotations

import functools
import gc
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from torchnumlint import cache as caching
from torchnumlint.config import Config, Settings
from torchnumlint.discovery import SUFFIXES, discover, project_files, project_root
from torchnumlint.findings import Finding, fixable
from torchnumlint.progress import Progress
from torchnumlint.results import FileOutcome, Options, RunResult
from torchnumlint.source import SourceError, SourceFile, read_source, write_source
from torchnumlint.workers import run_all

if TYPE_CHECKING:
    from torchnumlint import fact_reads
    from torchnumlint.index import ProjectIndex
    from torchnumlint.rules.base import Rule

# The project facts (`index`, `summaries`, `fact_reads`) and the engine (libcst, the rules) are imported where
# they are first needed: a run over files with nothing for a rule to read loads neither.
_NOQA = re.compile("noqa", re.IGNORECASE)  # as `directives` finds a noqa comment
# A file this large is parsed in a worker that is stopped after it, and never while another is
# (`workers.run_all`'s `recycle_above`): LibCST's tree of such a file lifts a worker's memory by
# hundreds of MB for good. Files are weighed by their size (`_size`: the heaviest go first).
LARGE_FILE = 500_000
# The most bytes of source being linted at once, all workers together (`run_all`'s `budget`): the
# heaviest files are sent first, so two ~400 KB files (torch's `_inductor/ir.py`, `scheduler.py`)
# were parsed at once, two trees of ~0.4-0.5 GB (at ~1,000-1,300 bytes of tree per byte); now a
# light file is linted beside a heavy one. A file over it runs with nothing beside it. Below
# LARGE_FILE: at 500 KB, torch's `common_modules.py` (246 KB, a worker of 270 MB) and
# `common_nn.py` (175 KB) were linted at once, the peak of a run (594 MB of PSS, 524 MB at 300 KB).
IN_FLIGHT = 300_000
# A run whose one item (the changed file's facts, then its lint) is a file this large or smaller
# runs it in this process, not in a forked worker (`workers.run_all`'s `alone_up_to`), still
# stopped after `Options.timeout`. Why that is safe: the one crash a worker was there for,
# LibCST's native parser on a statement nested 5,000-10,000 levels deep, cannot happen in the
# file's own lint (the pre-pass masks every statement deeper than `prepass.MAX_DEPTH`), and a
# caller's file that another rule parses whole is checked the same way first, the item going to
# a worker when one is that deep (`rules/callers._beyond_the_prepass`). What a native call cannot be stopped in
# is LibCST's parse, which on the most nested statements the pre-pass lets through (1,500-deep
# call chains, 200-deep brackets) took at most ~0.33 ms per byte (measured at load 9): at most
# ~33 s for a file this size, so a file still cannot run more than that past the limit.
ALONE = 100_000


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def process_file(source: SourceFile, rules: Sequence[Type[Rule]], index: ProjectIndex, options: Options) -> FileOutcome:
    """Lint or fix one file; a notebook's findings and errors are located in its cells."""
    from torchnumlint import notebook

    return notebook.locate(source, _lint_or_fix(source, rules, index, options))


def _beyond_every_rule(text: str) -> bool:
    """Whether no rule can report in `text` whatever is enabled: it never names torch (no rule
    reports in a file that does not import it, `engine.candidate_rules`) and has no noqa comment
    (which TNL900 judges in any file). Its lint is a syntax check, with neither libcst nor the rules."""
    return "torch" not in text and _NOQA.search(text) is None


def _too_large(source: SourceFile, limit: int) -> Optional[str]:
    """Why `source` is given to no rule, as its one-line warning: it is over `limit` bytes (the
    `max-lint-size` setting; 0: no limit) and a rule could report in it, so it would reach LibCST,
    whose tree cost 50-1,250 bytes of memory per byte of source on torch's largest files (its
    1.4 MB `common_methods_invocations.py`: 0.71 GB). A file
    no rule can report in (`_beyond_every_rule`) costs a syntax check alone, whatever its size."""
    size = len(source.raw)
    if not limit or size <= limit or _beyond_every_rule(source.text):
        return None
    return (
        f"{source.path}: not linted: {size:,} bytes, over the limit of {limit:,} (max-lint-size: "
        f"raise it with --max-lint-size or `max-lint-size` in [tool.torchnumlint], 0 for no limit)"
    )


def _lint_or_fix(source: SourceFile, rules: Sequence[Type[Rule]], index: ProjectIndex, options: Options) -> FileOutcome:
    path = source.path
    outcome = FileOutcome()
    if not (options.fix or options.diff) and _beyond_every_rule(source.text):
        from torchnumlint.prepass import ParseError, check_syntax

        try:
            check_syntax(source.text, path)
        except ParseError as exc:
            outcome.errors.append(f"{path}: cannot parse: {exc}")
        return outcome
    from torchnumlint.engine import ParseError, lint_text
    from torchnumlint.fixes import fix_text

    try:
        if not (options.fix or options.diff):
            skipped: List[str] = []  # statements the engine could not analyse (the rest is linted)
            found = lint_text(path, source.text, rules, index, strict=bool(options.strict), warnings=skipped)
            outcome.findings = options.fix_policy.apply(found)
            outcome.errors.extend(f"{path}: {message}" for message in skipped)
            return outcome
        result = fix_text(
            path, source.text, rules, index, unsafe=bool(options.unsafe_fixes), strict=bool(options.strict), policy=options.fix_policy
        )
    except ParseError as exc:
        outcome.errors.append(f"{path}: cannot parse: {exc}")
        return outcome
    except Exception as exc:  # a bug in torchnumlint: say so, keep going with other files
        import traceback

        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        outcome.errors.append(f"{path}: internal error in torchnumlint (please report it): {detail}")
        outcome.cacheable = False
        return outcome
    outcome.findings = result.findings
    outcome.errors.extend(f"{path}: {message}" for message in result.errors)
    if result.text != source.text:
        if options.diff:
            from torchnumlint import notebook

            if isinstance(source, notebook.NotebookSource):
                outcome.diff = notebook.diff(source, result.text)
            else:
                outcome.diff = unified_diff(path, source.text, result.text)
        else:
            try:
                if options.write:
                    write_source(source, result.text)
                outcome.fixed = result.applied
                outcome.fixed_codes = [(finding.code, finding.name) for finding in result.fixed]
                outcome.text = result.text
            except SourceError as exc:
                outcome.errors.append(f"{path}: {exc}")
    return outcome


def unified_diff(path: str, old: str, new: str) -> str:
    """A patch that `patch` applies, with the marker for a last line without a newline."""
    import difflib

    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}")
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def run(
    paths: Sequence[str],
    settings: Union[Settings, Config],
    rules: Sequence[Type[Rule]] = (),
    options: Optional[Options] = None,
    progress: Optional[Progress] = None,
) -> RunResult:
    """Lint (or fix) `paths`. `settings` finds each file's config and rules; a plain `Config` with
    `rules` applies to every file. `progress` is told of each file done."""
    if isinstance(settings, Config):
        settings = Settings.fixed(settings, rules)
    options = options or Options()
    result = RunResult()
    configs: List[str] = []
    files, result.errors = discover(paths, settings, force_exclude=options.force_exclude, configs=configs)
    files, unusable = settings.usable(files)  # files under a config that cannot be read are not linted
    result.errors += unusable
    result.found = len(files)
    walked = [os.path.abspath(p) for p in paths if os.path.isdir(p)]
    roots: Dict[Path, Optional[Path]] = {}
    projects: Dict[Optional[Path], List[Tuple[int, str]]] = {}
    by_folder: Dict[str, Optional[Path]] = {}  # a folder as spelled -> its project (one `Path` per folder)
    for position, path in enumerate(files):
        folder = os.path.dirname(path)
        if folder not in by_folder:
            by_folder[folder] = project_root(Path(os.path.abspath(path)).parent, roots)
        projects.setdefault(by_folder[folder], []).append((position, path))
    tally = _Tally(len(files), progress or Progress(None))
    tally.progress.start(len(files))
    configs_of: Dict[Optional[Path], List[str]] = {}
    for path in configs:
        configs_of.setdefault(project_root(Path(os.path.abspath(path)).parent, roots), []).append(path)
    for root, members in projects.items():
        covered = root is not None and any(_is_within(str(root), top) for top in walked)
        _Project(root, members, settings, options, covered, configs_of.get(root, [])).run(result, tally)
    tally.progress.finish()
    result.errors += [error for error in tally.read_errors if error is not None] + tally.project_errors
    result.files = tally.readable
    result.unsafe_fixes = all(tally.unsafe) if tally.unsafe else bool(options.unsafe_fixes)
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _Tally:
    """What a serial run used to learn while reading every file first: the read errors (reported
    before any other, in the files' order), how many files could be read, their unsafe-fixes."""

    __slots__ = ("files", "progress", "read_errors", "readable", "unsafe", "project_errors")

    def __init__(self, files: int, progress: Progress) -> None:
        self.files = files
        self.progress = progress
        self.read_errors: List[Optional[str]] = [None] * files
        self.readable = 0
        self.unsafe: List[bool] = []
        self.project_errors: List[str] = []


def file_options(options: Options, settings: Settings, path: str) -> Options:
    """`options` with what the command line left open taken from the file's own config."""
    config = settings.config_of(path)
    return options.replace(
        unsafe_fixes=config.unsafe_fixes if options.unsafe_fixes is None else options.unsafe_fixes,
        strict=config.strict if options.strict is None else options.strict,
        fix_policy=config.fix_policy,
    )


def reads_project_index(text: str, rules: Sequence[Type[Rule]]) -> bool:
    """Whether the findings of `rules` in `text` can depend on the project index: it can hold a
    finding of a rule that reads its facts (a `forward` for TNL301, an `autocast` for TNL302), or
    of a rule that sees what the project's helpers produce (TNL103's `log(probs(z))` names no
    softmax: only the index can tell). A pre-commit run on files that have none costs no project walk."""
    from torchnumlint.rules.imports import imports_torch

    return imports_torch(text) and any(rule.needs_index and (rule.produced or rule.could_fire(text)) for rule in rules)


def _can_hold_facts(text: str) -> bool:
    from torchnumlint import index, summaries

    return index.could_matter(text) or summaries.could_matter(text)


class _Linted:
    """What linting one file gave a worker: the outcome, or why the file could not be read."""

    __slots__ = ("outcome", "read_error", "row")

    def __init__(
        self, outcome: Optional[FileOutcome] = None, read_error: Optional[str] = None, row: Optional[Tuple[str, bytes]] = None
    ) -> None:
        self.outcome = outcome
        self.read_error = read_error
        self.row = row  # its cache entry (key, record), which the parent stores


class _Project:
    """The files passed from one project: each answered from the cache or linted (in workers)
    against the project's index, their outcomes put back in the order they were passed."""

    def __init__(
        self,
        root: Optional[Path],
        members: List[Tuple[int, str]],
        settings: Settings,
        options: Options,
        covered: bool,
        configs: Sequence[str] = (),
    ) -> None:
        self.root = root
        self.members = members
        self.settings = settings
        self.options = options
        self.covered = covered  # every file of the project was passed: no walk for the others
        self.configs = list(configs)  # its config files met by that walk (Hydra's `_target_`s)
        self.cache: Optional[caching.Cache] = None
        self.manifest: Optional[caching.Manifest] = None
        self._entries: Optional[caching.Rows] = None  # the lint results' rows, read at once
        if options.cache:
            folder = options.cache_dir or os.path.join(str(root) if root else os.getcwd(), caching.FOLDER_NAME)
            self.cache = caching.Cache(folder)
            self.manifest = caching.Manifest(self.cache, str(root) if root else f"files below {os.getcwd()}")
            self._entries = caching.Rows(self.cache, "lint")
        self._unstored: List[Tuple[str, bytes]] = []  # lint entries to store (`_store`)
        self._keys: Dict[Tuple[str, str], str] = {}  # (path, digest) -> its lint entry's key
        self.readable: Dict[str, None] = {}  # the passed files that could be read, in order
        self.digests: Dict[str, Tuple[str, bool]] = {}  # path -> (digest, can hold facts)
        self._paths: Optional[List[str]] = None
        self._fingerprint: Optional[str] = None
        self._checks: Dict[str, str] = {}  # facts key -> the digest of those facts
        self._fact_keys: Dict[Tuple[str, str], str] = {}  # (path, digest) -> its facts' key (`_facts_key`)
        self._parsed: Dict[str, ProjectIndex] = {}  # facts parsed in this run, not yet merged
        self._built: Optional[ProjectIndex] = None  # the project's index, once built in this run
        self._replay: Optional[fact_reads.Replay] = None  # cached results' questions asked of it
        self.hits_read_index = False

    # -- what is known without parsing ----------------------------------------------------------
    def _known(self, path: str) -> Optional[Tuple[str, bool]]:
        """(digest, can hold facts) of `path` from the manifest, without reading it."""
        if path not in self.digests and self.manifest is not None:
            record = self.manifest.lookup(path, caching.stat_of(path))
            if record is not None:
                self.digests[path] = (record[1], record[2])
        return self.digests.get(path)

    def _source(self, path: str) -> SourceFile:
        return read_source(path, self.settings.config_of(path).max_file_size)

    def _read(self, path: str) -> SourceFile:
        """The file's source; with the cache, its digest noted (and recorded in the manifest)."""
        stat = caching.stat_of(path)
        source = self._source(path)
        if self.manifest is not None:
            raw = caching.digest(source.raw)
            matters = _can_hold_facts(source.text)
            self.digests[path] = (raw, matters)
            self.manifest.record(path, stat, raw, matters)
        return source

    def _digest(self, path: str) -> Optional[Tuple[str, bool]]:
        """(digest, can hold facts) of `path`, read if the manifest cannot vouch for it; None
        when it cannot be read (it adds no facts)."""
        known = self._known(path)
        if known is None:
            try:
                self._read(path)
            except SourceError:
                return None
            known = self.digests[path]
        return known

    def _project_paths(self) -> List[str]:
        """Every file of the project (in the form the passed files' paths have: findings name
        them), in the order a run over the whole project reads them: its Python files as the
        walk meets them, then its config files, then any passed file the walk leaves out (one
        named on the command line although excluded). Which files were passed does not change
        the order, so a pre-commit run merges the facts as a run over the project does (the
        finalized facts, `project_tables.py`, are the same for any file passed)."""
        if self._paths is None:
            passed = list(self.readable)
            if self.covered:
                self._paths = passed + self.configs
            elif self.root is not None and passed:
                top = str(self.root) if os.path.isabs(passed[0]) else os.path.relpath(self.root)
                if self.cache is not None:
                    from torchnumlint.listing import project_files_listed

                    walked = project_files_listed(top, self.settings, self.cache)
                else:
                    walked = list(project_files(top, self.settings))
                spelled = _as_passed(walked, passed)
                code = [spelled.get(path, path) for path in walked if path.endswith(SUFFIXES)]
                self._paths = code + [path for path in walked if not path.endswith(SUFFIXES)]
                self._paths += [path for path in passed if path not in spelled.values()]
            else:
                self._paths = passed
        return self._paths

    def fingerprint(self) -> str:
        """The digests of the facts of the project's files that can hold any (in the order their
        facts are merged): the index is made of these facts alone, so an edit that leaves a
        file's facts as they were (a comment, a line inside a function that returns the same
        kinds) leaves every other file's entry valid. The facts' digests come from the pack
        (`Cache.checks`), without reading the facts; a file not there is parsed for its facts here."""
        if self._fingerprint is None:
            assert self.cache is not None
            keys: Dict[str, str] = {}
            for path in self._project_paths():
                known = self._digest(path)
                if known is not None and known[1]:
                    keys[path] = self._facts_key(path, known[0])
            wanted = [key for key in keys.values() if key not in self._checks]
            self._checks.update(self.cache.checks("facts", wanted))
            self._parse_facts([path for path, key in keys.items() if key not in self._checks])
            parts = [(path, self._checks[key]) for path, key in keys.items() if key in self._checks]
            self._fingerprint = caching.digest(caching.package_fingerprint(), parts)
        return self._fingerprint

    def _parse_facts(self, paths: List[str]) -> None:
        """Parse the facts of `paths` (in workers) into `_parsed`, their digests into `_checks`,
        and store them in the pack; a file that cannot be read gives none."""
        stored = self.cache is not None
        read = lambda path: _facts_of(path, self.settings.config_of(path).max_file_size, stored)  # noqa: E731
        new = []
        for path, facts in zip(
            paths, run_all(read, paths, self.options.jobs, _no_facts, self.options.timeout, _size, LARGE_FILE, alone_up_to=ALONE)
        ):
            if facts is None:
                continue
            raw, matters, part, row = facts
            self._parsed[path] = part
            self.digests.setdefault(path, (raw, matters))
            if row is not None:
                key = self._facts_key(path, raw)
                self._checks[key] = row[1]
                new.append((key, *row))
        if self.cache is not None:
            self.cache.put_encoded("facts", new)

    def _key(self, path: str, raw: str) -> str:
        key = self._keys.get((path, raw))
        if key is None:
            strict = bool(self.options.strict if self.options.strict is not None else self.settings.config_of(path).strict)
            key = caching.digest(caching.package_fingerprint(), "lint", path, raw, self.settings.selection_key(path), strict)
            self._keys[path, raw] = key
        return key

    def _unsafe_fixes(self, path: str) -> bool:
        """`file_options(...).unsafe_fixes` of `path`, without copying the options."""
        unsafe = self.options.unsafe_fixes
        return bool(self.settings.config_of(path).unsafe_fixes if unsafe is None else unsafe)

    def _entry(self, path: str, raw: str) -> Optional[object]:
        """The file's lint entry in the cache, as stored (a torn or foreign one: None)."""
        assert self._entries is not None
        return self._entries.get(self._key(path, raw))

    def _want_entries(self) -> None:
        """Read the lint entries of the passed files that the manifest vouches for, in one query."""
        if self._entries is not None:
            known = [(path, self._known(path)) for _, path in self.members]
            self._entries.want([self._key(path, digest[0]) for path, digest in known if digest is not None])

    def _store(self, rows: Sequence[Tuple[str, bytes]], at_least: int = 1) -> None:
        """Queue lint entries, and store the queue in one transaction once it holds `at_least`."""
        self._unstored.extend(rows)
        if self.cache is not None and self._unstored and len(self._unstored) >= at_least:
            self.cache.put_records("lint", self._unstored)
            self._unstored = []

    # Lint entries stored per transaction while a project is linted (a run stopped midway keeps
    # those stored; a transaction per file would cost a journal write each).
    _BATCH = 256

    def _cached(self, path: str) -> Optional[FileOutcome]:
        """The file's outcome from the cache, when its entry is valid and there is nothing to fix."""
        known = self._known(path)
        if self.cache is None or known is None:
            return None
        entry = self._entry(path, known[0])
        if not isinstance(entry, tuple) or len(entry) != 4:
            return None
        fingerprint, findings, errors, reads = entry
        if fingerprint is not None:
            if fingerprint != self.fingerprint():
                asked = None if reads is None else caching.reads_of(reads)
                if asked is None or not self._answers_hold(asked):
                    return None
                key = self._key(path, known[0])
                self._store([(key, caching.record_of((self.fingerprint(), findings, errors, reads)))], self._BATCH)
            self.hits_read_index = True
        if (self.options.fix or self.options.diff) and any(fixable(finding, self._unsafe_fixes(path)) for finding in findings):
            return None
        return FileOutcome(findings=list(findings), errors=list(errors))  # (the entry's lists may be another file's too)

    def _answers_hold(self, reads: fact_reads.Reads) -> bool:
        """Whether the questions a cached result asked of the facts have the same answers now."""
        if self._replay is None:
            from torchnumlint.fact_reads import Replay

            self._replay = Replay(self._project_index(), self._text_or_none)
        return self._replay.still_valid(reads)

    def _text_or_none(self, path: str) -> Optional[str]:
        try:
            return self._source(path).text
        except SourceError:
            return None

    def _project_index(self) -> ProjectIndex:
        """The project's index, built once in a run (`_index`)."""
        if self._built is None:
            self._built = self._index()
        return self._built

    def _reads_index(self, path: str, text: str) -> bool:
        """`reads_project_index` for the file's rules, which are not even loaded for a file no
        rule can report in."""
        return not _beyond_every_rule(text) and reads_project_index(text, self.settings.rules_for(path))

    # -- the run --------------------------------------------------------------------------------
    def run(self, result: RunResult, tally: _Tally) -> None:
        reads_index: Dict[str, bool] = {}  # of the files read here: whether their rules read the index
        self._want_entries()
        for position, path in self.members:  # every passed file's digest first: the fingerprint reads them
            if self._known(path) is None:
                try:
                    source = self._read(path)
                except SourceError as exc:
                    tally.read_errors[position] = f"{path}: {exc}"
                    tally.progress.advance()
                    continue
                if self.cache is None or self._entry(path, self.digests[path][0]) is None:
                    reads_index[path] = self._reads_index(path, source.text)  # a miss
                del source  # streamed: the worker that lints it reads it again
            self.readable[path] = None
            tally.readable += 1
            tally.unsafe.append(self._unsafe_fixes(path))
        outcomes: Dict[int, FileOutcome] = {}
        todo: List[Tuple[int, str]] = []
        for position, path in self.members:
            if path not in self.readable:
                continue
            outcome = self._cached(path)
            if outcome is not None:
                outcomes[position] = outcome
                tally.progress.advance()
                continue
            if path not in reads_index:
                try:
                    reads_index[path] = self._reads_index(path, self._source(path).text)
                except SourceError as exc:
                    tally.read_errors[position] = f"{path}: {exc}"
                    tally.progress.advance()
                    continue
            todo.append((position, path))
        needs_index = any(reads_index[path] for _, path in todo)
        if todo:
            from torchnumlint.index import ProjectIndex

            index = self._project_index() if needs_index else ProjectIndex.empty()
            # The facts live as long as the project's run, and the collector would walk all of
            # them at every full collection of the lint (18 % of a run's time): frozen, they are
            # never walked (nor touched in forked workers, whose pages stay shared).
            frozen = needs_index and gc.get_freeze_count() == 0
            if frozen:
                gc.freeze()
            fingerprint = self.fingerprint() if needs_index and self.cache is not None else None
            lint = _Linter(self, index, fingerprint)
            paths = [path for _, path in todo]
            for (position, path), linted in zip(
                todo, run_all(lint, paths, self.options.jobs, _failed, self.options.timeout, _size, LARGE_FILE, IN_FLIGHT, ALONE)
            ):
                if linted.read_error is not None:
                    tally.read_errors[position] = linted.read_error
                else:
                    assert linted.outcome is not None  # a file that was read was linted
                    outcomes[position] = linted.outcome
                if linted.row is not None:
                    self._store([linted.row], self._BATCH)
                tally.progress.advance()
            del index, lint
            self._built = self._replay = None
            if frozen:
                gc.unfreeze()  # back in the collector's care: what nothing holds now is freed
        self._store([])
        if self.manifest is not None:
            self.manifest.save()
        self._report(outcomes, needs_index, result, tally)

    def _report(self, outcomes: Dict[int, FileOutcome], needs_index: bool, result: RunResult, tally: _Tally) -> None:
        findings: List[Finding] = []
        fixed_any = False
        for position, path in self.members:
            outcome = outcomes.get(position)
            if outcome is None:
                continue
            findings.extend(outcome.findings)
            tally.project_errors.extend(outcome.errors)
            result.fixed += outcome.fixed
            if outcome.fixed_codes:
                result.fixed_by_file[path] = outcome.fixed_codes
            if outcome.diff:
                result.diffs.append(outcome.diff)
            fixed_any = fixed_any or outcome.text is not None
        if (needs_index or self.hits_read_index) and fixed_any:
            findings = self._relint_cross_file(findings, [path for position, path in self.members if position in outcomes])
        result.findings.extend(findings)

    def _index(self) -> ProjectIndex:
        """The project's index: with the cache and nothing to fix, a `LazyIndex` over the
        project's stored tables when they still hold (`project_tables.py`), else the whole index."""
        if self.cache is not None and not (self.options.fix or self.options.diff):
            lazy = self._lazy_index()
            if lazy is not None:
                return lazy
        return self._whole_index()

    # More files changed than this since the tables were made: the whole index is built (each
    # changed file's facts are decoded twice, before and after; a bound chosen, not measured).
    _LAZY_CHANGES = 64

    def _tables_key(self) -> str:
        """The project's tables in the pack: one row per project and form of its paths."""
        paths = self._project_paths()
        form = "" if paths and os.path.isabs(paths[0]) else os.getcwd()
        return caching.digest(caching.package_fingerprint(), "tables", str(self.root), form)

    def _facts_keys(self) -> Dict[str, str]:
        """path -> its facts' key, for the project's files that can be read, in their order."""
        keys: Dict[str, str] = {}
        for path in self._project_paths():
            known = self._digest(path)
            if known is not None:
                keys[path] = self._facts_key(path, known[0])
        return keys

    def _lazy_index(self) -> Optional[ProjectIndex]:
        """A `LazyIndex` from the stored tables, updated for the files whose facts changed since;
        None when there are none, or they cannot be updated (a file added or deleted, or a change
        that reaches what `finalize` gives: `project_tables.updated`)."""
        from torchnumlint import project_tables
        from torchnumlint.index import ProjectIndex

        assert self.cache is not None
        stored = self.cache.get_many("tables", [self._tables_key()])
        tables = next(iter(stored.values()), None)
        self.fingerprint()  # the files whose facts are not in the pack are parsed (and stored) now
        keys = self._facts_keys()
        if not isinstance(tables, project_tables.Tables) or tables.paths != list(keys):
            return None
        changed = {path: tables.keys[at] for at, (path, key) in enumerate(keys.items()) if key != tables.keys[at]}
        if len(changed) > self._LAZY_CHANGES:
            return None
        if changed:
            old = self.cache.get_many("facts", list(changed.values()))
            before = {path: old.get(key) for path, key in changed.items()}
            after = self._facts(list(changed), keys)
            if not all(isinstance(part, ProjectIndex) for part in before.values()):
                return None
            if project_tables.updated(tables, list(keys.values()), before, after) is None:  # type: ignore[arg-type]
                return None  # (updated tables are not stored: encoding them costs more than updating them again)
        return project_tables.LazyIndex(tables, lambda paths: self._facts(paths, keys), self._whole_index)

    def _facts(self, paths: Sequence[str], keys: Dict[str, str]) -> Dict[str, ProjectIndex]:
        """The facts of `paths`: parsed in this run, else from the pack, else parsed here (a row
        gone since the tables were made); a file that cannot be read now has none."""
        from torchnumlint.index import ProjectIndex

        found = {path: self._parsed[path] for path in paths if path in self._parsed}
        assert self.cache is not None
        stored = self.cache.get_many("facts", [keys[path] for path in paths if path not in found])
        for path in paths:
            part = found.get(path) or stored.get(keys[path])
            if not isinstance(part, ProjectIndex):
                facts = _facts_of(path, self.settings.config_of(path).max_file_size, False)
                part = facts[2] if facts is not None else ProjectIndex.empty()
            found[path] = part
        return found

    def _whole_index(self) -> ProjectIndex:
        """The project's index, each file's facts from the cache or parsed (in workers), merged in
        the order a serial run reads the files; with the cache, its tables stored for the next run."""
        from torchnumlint.index import ProjectIndex

        paths = self._project_paths()
        parts: Dict[str, ProjectIndex] = {path: self._parsed[path] for path in paths if path in self._parsed}
        keys: Dict[str, str] = {}  # path -> its facts' key, for the files whose digest is known
        if self.cache is not None:
            for path in paths:
                known = self._digest(path) if path not in parts else None
                if known is not None:
                    keys[path] = self._facts_key(path, known[0])
            stored = self.cache.get_many("facts", list(keys.values()))
            for path, key in keys.items():
                found = stored.get(key)
                if isinstance(found, ProjectIndex):
                    parts[path] = found
        self._parse_facts([path for path in paths if path not in parts])
        parts.update((path, part) for path, part in self._parsed.items() if path not in parts)
        self._parsed = {}
        index = ProjectIndex.empty()
        merged = [path for path in paths if path in parts]
        with caching.collector_paused():  # the merged facts hold no cycles, and are frozen after (`run`)
            for path in merged:
                index.absorb(parts[path])
            index.finalize()
        if self.cache is not None and not (self.options.fix or self.options.diff or self.covered):
            self._store_tables(merged, parts, index)
        return index

    def _store_tables(self, merged: List[str], parts: Dict[str, ProjectIndex], index: ProjectIndex) -> None:
        """The tables of the finalized `index` (`project_tables.make`), for the next one-file run.
        Made by runs over part of a project only: making them answers every producer question of
        the project (0.55 s of CPU on diffusers), which a run over the whole project would pay
        after each edit that changes a fact, for no use of its own."""
        from torchnumlint import project_tables

        keys = self._facts_keys()
        if list(keys) == merged:
            tables = project_tables.make(merged, list(keys.values()), parts, index)
            self.cache.put_many("tables", [(self._tables_key(), tables)])  # type: ignore[union-attr]

    def _facts_key(self, path: str, raw: str) -> str:
        """The key of the file's facts in the pack (asked of each project file by the fingerprint
        and again by the index: worked out once per file and digest)."""
        key = self._fact_keys.get((path, raw))
        if key is None:
            key = self._fact_keys[path, raw] = _facts_digest()(path, raw)
        return key

    def _relint_cross_file(self, findings: List[Finding], linted: List[str]) -> List[Finding]:
        """Fixes in one file change what rules that read the project index report in another (a
        Function given `custom_fwd` is safe wherever it is called): report those rules' findings
        against the project as fixed (now on disk), not as it was."""
        from torchnumlint import notebook
        from torchnumlint.engine import ParseError, lint_text

        self.digests, self.readable, self._paths, self._parsed = {}, dict.fromkeys(linted), None, {}
        fresh = self._index()
        rules = {path: self.settings.rules_for(path) for path in linted}
        codes = {rule.code for chosen in rules.values() for rule in chosen if rule.needs_index}
        kept = [f for f in findings if f.code not in codes]
        for path in linted:
            own = file_options(self.options, self.settings, path)
            try:
                source = self._source(path)
                if _too_large(source, self.settings.config_of(path).max_lint_size) is not None:
                    continue  # already reported, and given to no rule
                found = own.fix_policy.apply(
                    lint_text(path, source.text, [r for r in rules[path] if r.needs_index], fresh, strict=bool(own.strict))
                )
                kept.extend(notebook.locate_findings(source, found))
            except (ParseError, SourceError):
                pass  # already reported for this file
        return kept


class _Linter:
    """Lints one file by path (in a worker: the settings and index are inherited at the fork),
    and encodes its cache entry (which the parent stores), with the questions it asked of the facts
    when it read them."""

    def __init__(self, project: _Project, index: ProjectIndex, fingerprint: Optional[str]) -> None:
        self.project = project
        self.index = index
        self.fingerprint = fingerprint
        self.recording: Optional[Callable[[], fact_reads.RecordingIndex]] = None
        if fingerprint is not None:
            from torchnumlint.fact_reads import recording

            self.recording = recording(index)

    def __call__(self, path: str) -> _Linted:
        project = self.project
        try:
            source = project._source(path)
        except SourceError as exc:
            return _Linted(read_error=f"{path}: {exc}")
        rules = [] if _beyond_every_rule(source.text) else project.settings.rules_for(path)
        options = file_options(project.options, project.settings, path)
        # a fix re-lints its own rewrites against the project (`ProjectIndex.with_file`): read whole
        fixing = options.fix or options.diff
        limit = project.settings.config_of(path).max_lint_size
        too_large = _too_large(source, limit)
        if too_large is not None:  # not cached: the next run says it again, and reads the file only
            return _Linted(outcome=FileOutcome(errors=[too_large], cacheable=False))
        if fixing and not rules and 0 < limit < len(source.raw):  # nothing to fix: syntax-checked as a lint does it
            options = options.replace(fix=False, diff=False)
        index = self.recording() if self.recording is not None and rules and not fixing else None
        outcome = process_file(source, rules, index or self.index, options)
        row = None
        if project.cache is not None and outcome.cacheable and outcome.text is None and not outcome.diff:
            reads = bool(rules) and reads_project_index(source.text, rules)
            if not reads or self.fingerprint is not None:
                asked = index.recorder.reads() if reads and index is not None else None
                entry = (self.fingerprint if reads else None, outcome.findings, outcome.errors, caching.reads_text(asked))
                row = (project._key(path, caching.digest(source.raw)), caching.record_of(entry))
        return _Linted(outcome=outcome, row=row)


@functools.lru_cache(maxsize=None)
def _facts_digest() -> Callable[..., str]:
    """`caching.digest(package_fingerprint(), "facts", ...)`, its prefix hashed once per process."""
    return caching.digester(caching.package_fingerprint(), "facts")


def _as_passed(walked: List[str], passed: List[str]) -> Dict[str, str]:
    """walked path -> the passed path that is the same file, as the user spelled it (findings and
    facts name it so): by the normalised path, else (another spelling: `../x`, a link) by the real
    path, which is looked up only then (a `realpath` per file of the project costs a stat each)."""
    walked_set = set(walked)
    spelled = {os.path.normpath(path): path for path in passed if os.path.normpath(path) in walked_set}
    rest = [path for path in passed if os.path.normpath(path) not in walked_set]
    if rest:
        real = {os.path.realpath(path): path for path in rest}
        spelled.update((path, real[os.path.realpath(path)]) for path in walked if os.path.realpath(path) in real)
    return spelled


def _failed(path: str, why: str) -> _Linted:
    return _Linted(outcome=FileOutcome(errors=[f"{path}: {why}"], cacheable=False))


def _facts_of(path: str, max_size: int, stored: bool) -> Optional[Tuple[str, bool, ProjectIndex, Optional[Tuple[bytes, str]]]]:
    """(digest, can hold facts, facts, their pack row when `stored`: encoded here, in the
    worker, not in the parent) of a file of the project; None when it cannot be read."""
    try:
        source = read_source(path, max_size)
    except SourceError:
        return None
    from torchnumlint import index

    facts = index.index_file(path, source.text)
    return caching.digest(source.raw), _can_hold_facts(source.text), facts, caching.encode(facts) if stored else None


def _no_facts(path: str, why: str) -> None:
    return None  # a file whose facts cannot be had adds none, as one that does not parse
