"""What `torchnumlint [OPTIONS] [PATHS]...` does once its options are read (`lint`), without click.

Both readers of a command line call `lint`: click (`commands.py`) for one with options, and
`cli.main` for one of paths alone, which passes none and so gets `lint`'s defaults (a test holds
them equal to click's). click is imported here only to raise a usage error, which only options
can cause; output goes through `echo`, which writes as `click.echo` does.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from typing import List, Optional, Sequence

from torchnumlint import colour
from torchnumlint.report import FORMATS  # the reporters import neither libcst nor the engine

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
COMMAND_NAMES = ("rule", "verify", "server", "clean")  # a first word naming one runs it (`commands.COMMANDS`)
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # click's pattern for what it strips off a stream that is no terminal


def echo(text: str, err: bool = False, nl: bool = True, color: bool = False) -> None:
    """Write `text` as `click.echo` does on a POSIX stream: flushed, and without ANSI escapes where
    the stream is no terminal unless `color` (the report, painted or not by `colour`)."""
    stream = sys.stderr if err else sys.stdout
    out = text + "\n" if nl else text
    if not color and not stream.isatty():
        out = _ANSI.sub("", out)
    if out:
        stream.write(out)
    stream.flush()


def _usage_error(message: str) -> Exception:
    """click's usage error (the usage line, exit 2): only options cause one, so click is loaded."""
    import click

    return click.UsageError(message)


def _split(values: Sequence[str]) -> List[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


def _per_file_ignores(values: Sequence[str]):
    """`--per-file-ignores GLOB:CODE,CODE` (repeatable) as ((glob, codes), ...); None when not given."""
    if not values:
        return None
    pairs = []
    for value in values:
        glob, sep, codes = value.rpartition(":")
        if not sep or not glob or not codes.strip():
            import click

            raise click.BadParameter(f"{value!r}: expected GLOB:CODE[,CODE...]", param_hint="--per-file-ignores")
        pairs.append((glob, tuple(_split([codes]))))
    return tuple(pairs)


# The lint command's help (`commands.cli` shows this docstring).
def lint(
    paths: Sequence[str] = (),
    fix: bool = False,
    unsafe_fixes: Optional[bool] = None,
    fix_only: bool = False,
    show_fixes: bool = False,
    diff: bool = False,
    add_noqa: bool = False,
    strict: Optional[bool] = None,
    select: Sequence[str] = (),
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    output_format: str = "text",
    output_file: Optional[str] = None,
    config_path: Optional[str] = None,
    isolated: bool = False,
    exclude: Sequence[str] = (),
    extend_exclude: Sequence[str] = (),
    per_file_ignores: Sequence[str] = (),
    stdin_filename: Optional[str] = None,
    force_exclude: bool = False,
    exit_zero: bool = False,
    exit_non_zero_on_fix: bool = False,
    show_files: bool = False,
    show_settings: bool = False,
    color: str = "auto",
    statistics: bool = False,
    quiet: bool = False,
    jobs: Optional[int] = None,
    max_lint_size: Optional[int] = None,
    no_cache: bool = False,
    cache_dir: Optional[str] = None,
) -> None:
    """Lint PATHS (files or folders; default: the current folder; `-`: standard input) for
    numerically unsafe PyTorch. Folders are searched for .py, .pyi and .ipynb files, skipping
    excluded and gitignored ones; a file named is linted as named (see --force-exclude). A run
    over more than a few hundred files shows its progress on stderr when that is a terminal."""
    # the rules (and libcst) are imported only where needed: a fully cached run never needs them
    from torchnumlint import config as configuration
    from torchnumlint.runner import Options, run
    from torchnumlint.workers import default_jobs

    stdin = "-" in paths
    _check_usage(paths, stdin, stdin_filename, fix or fix_only, diff, add_noqa, show_fixes)
    options = Options(
        fix=fix or fix_only,
        diff=diff,
        unsafe_fixes=unsafe_fixes,
        strict=strict,
        jobs=jobs or default_jobs(),
        cache=not no_cache,
        cache_dir=cache_dir,
        force_exclude=force_exclude,
    )
    fixed_source: Optional[bytes] = None
    try:
        if isolated and config_path:
            raise _usage_error("--isolated reads no configuration file: it cannot be combined with --config")
        overrides = configuration.Overrides(
            select=tuple(_split(select)) or None,
            extend_select=tuple(_split(extend_select)),
            ignore=tuple(_split(ignore)),
            exclude=tuple(exclude) + tuple(extend_exclude),
            per_file_ignores=_per_file_ignores(per_file_ignores),
            cwd=os.getcwd(),
            isolated=isolated,
            max_lint_size=max_lint_size,
        )
        for selector in (
            (overrides.select or ())
            + overrides.extend_select
            + overrides.ignore
            + tuple(code for _, codes in overrides.per_file_ignores or () for code in codes)
        ):
            configuration.check_selector(selector, "command line")
        # each file's settings come from the config nearest to it, read as the run reaches it
        settings = configuration.Settings(overrides, config_path)
        if show_files or show_settings:
            from torchnumlint.show import show

            sys.exit(show(list(paths) or ["."], settings, force_exclude, files=show_files))
        if stdin:
            from torchnumlint.stdin import run_stdin

            raw = sys.stdin.buffer.read()
            result, fixed_source = run_stdin(raw, stdin_filename or "-", settings, options)
        else:
            from torchnumlint.progress import Progress

            progress = Progress(sys.stderr if sys.stderr.isatty() and not quiet else None)
            result = run(list(paths) or ["."], settings, options=options, progress=progress)
    except configuration.ConfigError as exc:
        echo(f"torchnumlint: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if unsafe_fixes is None:  # the files' configs decided: findings are marked fixable as they did
        options.unsafe_fixes = result.unsafe_fixes
    if add_noqa:
        sys.exit(_add_noqa(result, quiet))

    # with --fix on standard input, stdout carries the fixed source: everything else goes to stderr
    to_stderr = fixed_source is not None
    if fixed_source is not None:
        sys.stdout.buffer.write(fixed_source)
        sys.stdout.flush()
    nothing = result.found == 0
    if diff:
        echo("".join(result.diffs), nl=False)
    elif fix_only:
        if not quiet:
            echo(f"Fixed {result.fixed} {'finding' if result.fixed == 1 else 'findings'}.", err=to_stderr)
    else:
        output = FORMATS[output_format](result, options, quiet=quiet or nothing, statistics=statistics)
        if output_file:
            _write_report(output_file, output)
        elif output:
            if output_format in ("text", "concise") and colour.wanted(color, sys.stderr if to_stderr else sys.stdout):
                output = colour.paint(output)
            echo(output, err=to_stderr, color=True)
    if show_fixes and result.fixed_by_file:
        echo(_fixes_applied(result), err=to_stderr)
    for error in result.errors:
        echo(error, err=True)

    if result.errors:
        sys.exit(EXIT_ERROR)
    if nothing and not (force_exclude and paths and all(path == "-" or os.path.isfile(path) for path in paths)):
        # (under --force-exclude, named files that the excludes drop are what was asked: pre-commit,
        # and so is a --stdin-filename they drop)
        named = ", ".join(paths) if paths else "the current folder"
        echo(f"warning: no Python files found under {named}", err=True)
        sys.exit(EXIT_ERROR if paths else EXIT_CLEAN)
    if exit_zero:
        sys.exit(EXIT_CLEAN)
    if exit_non_zero_on_fix and (fix or fix_only) and result.fixed:
        sys.exit(EXIT_FINDINGS)
    if fix_only:
        sys.exit(EXIT_CLEAN)
    if diff:
        sys.exit(EXIT_FINDINGS if result.diffs else EXIT_CLEAN)
    sys.exit(EXIT_FINDINGS if result.findings else EXIT_CLEAN)


def _check_usage(
    paths: Sequence[str], stdin: bool, stdin_filename: Optional[str], fix: bool, diff: bool, add_noqa: bool, show_fixes: bool
) -> None:
    """The combinations of options that have no meaning, as usage errors (exit 2)."""
    if stdin and len(paths) > 1:
        raise _usage_error("`-` (standard input) cannot be combined with other paths")
    if stdin_filename and not stdin:
        raise _usage_error("--stdin-filename names the source given on standard input: pass `-` as the path")
    if add_noqa and (fix or diff or stdin):
        raise _usage_error("--add-noqa edits the files named; it cannot be combined with --fix, --diff or `-`")
    if show_fixes and not fix:
        raise _usage_error("--show-fixes lists the fixes applied: use it with --fix or --fix-only")


def _add_noqa(result, quiet: bool) -> int:
    """Write the directives that silence every finding; the exit code (2 where a file could not
    be linted or written, else 0: nothing is left to report)."""
    from torchnumlint.noqa_edit import add_noqa
    from torchnumlint.rules.registry import registry

    meta = [code for code, rule in registry().items() if rule.meta]  # a noqa for an unused noqa is no fix
    added, errors = add_noqa(result.findings, skip=meta)
    if not quiet:
        echo(f"Added {added} noqa {'directive' if added == 1 else 'directives'}.", err=True)
    for error in result.errors + errors:
        echo(error, err=True)
    return EXIT_ERROR if result.errors or errors else EXIT_CLEAN


def _fixes_applied(result) -> str:
    """--show-fixes: `Fixed findings:` then per file `path:` and `  N × CODE (name)` lines."""
    lines = ["Fixed findings:"]
    for path, fixed in sorted(result.fixed_by_file.items()):
        lines.append(f"{path}:")
        lines += [f"  {count} × {code} ({name})" for (code, name), count in sorted(Counter(fixed).items())]
    return "\n".join(lines)


def _write_report(path: str, output: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(output + ("\n" if output and not output.endswith("\n") else ""))
    except OSError as exc:
        echo(f"torchnumlint: cannot write the report to {path}: {exc.strerror}", err=True)
        sys.exit(EXIT_ERROR)
