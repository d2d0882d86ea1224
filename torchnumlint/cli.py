"""The `torchnumlint` command: options -> Config -> run -> report -> exit code.

`torchnumlint [OPTIONS] [PATHS]...` lints, and so does `torchnumlint check [OPTIONS] [PATHS]...`
(ruff's spelling: the word is dropped); `torchnumlint rule CODE` / `rule --all` prints rule docs,
`torchnumlint verify` proves the rules at runtime, `torchnumlint server` is the language server,
`torchnumlint clean` removes the cache. A first word naming a command runs it; a folder named
like a command is linted after `--` (`torchnumlint -- server`) or after `check`.

Every lint option can also come from a `TORCHNUMLINT_<OPTION>` environment variable
(`TORCHNUMLINT_OUTPUT_FORMAT=concise`); the command line wins over it.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import List, Optional, Sequence

import click

from torchnumlint import __version__, colour
from torchnumlint.report import FORMATS  # the reporters import neither libcst nor the engine

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _split(values: Sequence[str]) -> List[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


def _rule_or_fail(code: str):
    from torchnumlint.rules.registry import registry

    rule = registry().get(code.strip().upper())
    if rule is None:
        raise click.BadParameter(f"unknown rule {code!r} (see `torchnumlint rule --all`)")
    return rule


_HELP = {"help_option_names": ["-h", "--help"]}


def _per_file_ignores(values: Sequence[str]):
    """`--per-file-ignores GLOB:CODE,CODE` (repeatable) as ((glob, codes), ...); None when not given."""
    if not values:
        return None
    pairs = []
    for value in values:
        glob, sep, codes = value.rpartition(":")
        if not sep or not glob or not codes.strip():
            raise click.BadParameter(f"{value!r}: expected GLOB:CODE[,CODE...]", param_hint="--per-file-ignores")
        pairs.append((glob, tuple(_split([codes]))))
    return tuple(pairs)


class _Torchnumlint(click.Command):
    """The lint command, which hands the arguments to another command when the first names one
    (`check` names the lint command itself)."""

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None, **extra):  # type: ignore[override]  # click's other parameters pass through `extra` by keyword
        args = list(sys.argv[1:] if args is None else args)
        if args and args[0] == "check":
            args = args[1:]
        elif args and args[0] in COMMANDS:
            return COMMANDS[args[0]].main(args=args[1:], prog_name=f"torchnumlint {args[0]}", **extra)
        return super().main(args=args, prog_name=prog_name or "torchnumlint", **extra)


@click.command(
    cls=_Torchnumlint,
    context_settings={**_HELP, "auto_envvar_prefix": "TORCHNUMLINT"},
    epilog="Also `torchnumlint check [OPTIONS] [PATHS]...`. Other commands: `torchnumlint rule CODE` "
    "(a rule's docs; `rule --all`: every rule), "
    "`torchnumlint verify` (prove every rule at runtime on this machine's device; needs torch), "
    "`torchnumlint server` (the language server, for editors; needs the server extra), "
    "`torchnumlint clean` (remove the cache folders below the current folder). "
    "Each option can be set by a TORCHNUMLINT_<OPTION> environment variable (TORCHNUMLINT_OUTPUT_FORMAT). "
    "Exit codes: 0 nothing found, 1 findings, 2 an error (a usage error, a file that cannot be "
    "read or parsed, no Python files under the paths named).",
)
@click.argument("paths", nargs=-1, type=click.Path(readable=False))  # an unreadable file is its own error
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes that change results.")
@click.option("--fix-only", is_flag=True, help="Apply fixes and report nothing else; exit 0 whatever remains.")
@click.option("--show-fixes", is_flag=True, help="With --fix or --fix-only: list the fixes applied, per file and rule.")
@click.option("--diff", is_flag=True, help="Print the changes --fix would make; write nothing.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding (merged with its noqa comment); exit 0.")
@click.option(
    "--strict/--no-strict",
    default=None,
    help="Also report what can be a hazard without evidence in the code that it is reached "
    "(a division by any sum or norm, a root of any variance).",
)
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the default set).")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable in addition.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option(
    "--output-format",
    type=click.Choice(list(FORMATS)),
    default="text",
    show_default=True,
    help="text: each finding with its source line and fix; concise: one line each; json; sarif "
    "(GitHub code scanning); github (workflow annotations); gitlab (Code Quality); junit.",
)
@click.option(
    "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write the report to this file instead of standard output."
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Read settings from this file.")
@click.option("--isolated", is_flag=True, help="Read no configuration file: the defaults and the command line only.")
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Also exclude these globs (added to every config's excludes and the defaults; relative to the current folder).",
)
@click.option("--extend-exclude", multiple=True, metavar="GLOB", help="The same as --exclude (ruff's spelling).")
@click.option(
    "--per-file-ignores",
    multiple=True,
    metavar="GLOB:CODES",
    help="Rules off for files matching GLOB (relative to the current folder); replaces the configs' per-file-ignores.",
)
@click.option(
    "--stdin-filename",
    metavar="PATH",
    help="With `-` as the path: lint standard input as the file PATH (its config and per-file "
    "ignores); with --fix the fixed source goes to stdout, the report to stderr.",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply excludes and .gitignore to files named explicitly too (by default a file you "
    "name is linted even if excluded or ignored; pre-commit's hook sets this).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when --fix or --fix-only changed a file, even if nothing remains.")
@click.option("--show-files", is_flag=True, help="List the files that would be linted, and exit.")
@click.option("--show-settings", is_flag=True, help="Print the settings that apply to the first file that would be linted, and exit.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the text and concise output (auto: on a terminal, unless NO_COLOR is set).",
)
@click.option("--statistics", is_flag=True, help="Count findings per rule.")
@click.option("-q", "--quiet", is_flag=True, help="Findings only: no summary, no progress.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: every CPU).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="Keep the cache here (default: .torchnumlint_cache in each project's root).",
)
@click.version_option(__version__, "--version", prog_name="torchnumlint")
def cli(
    paths,
    fix,
    unsafe_fixes,
    fix_only,
    show_fixes,
    diff,
    add_noqa,
    strict,
    select,
    extend_select,
    ignore,
    output_format,
    output_file,
    config_path,
    isolated,
    exclude,
    extend_exclude,
    per_file_ignores,
    stdin_filename,
    force_exclude,
    exit_zero,
    exit_non_zero_on_fix,
    show_files,
    show_settings,
    color,
    statistics,
    quiet,
    jobs,
    no_cache,
    cache_dir,
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
            raise click.UsageError("--isolated reads no configuration file: it cannot be combined with --config")
        overrides = configuration.Overrides(
            select=tuple(_split(select)) or None,
            extend_select=tuple(_split(extend_select)),
            ignore=tuple(_split(ignore)),
            exclude=tuple(exclude) + tuple(extend_exclude),
            per_file_ignores=_per_file_ignores(per_file_ignores),
            cwd=os.getcwd(),
            isolated=isolated,
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

            raw = click.get_binary_stream("stdin").read()  # type: ignore[operator, unused-ignore]  # click >= 8.5 serves it from a deprecated module __getattr__ (typed object); earlier versions type it
            result, fixed_source = run_stdin(raw, stdin_filename or "-", settings, options)
        else:
            from torchnumlint.progress import Progress

            progress = Progress(sys.stderr if sys.stderr.isatty() and not quiet else None)
            result = run(list(paths) or ["."], settings, options=options, progress=progress)
    except configuration.ConfigError as exc:
        click.echo(f"torchnumlint: {exc}", err=True)
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
        click.echo("".join(result.diffs), nl=False)
    elif fix_only:
        if not quiet:
            click.echo(f"Fixed {result.fixed} {'finding' if result.fixed == 1 else 'findings'}.", err=to_stderr)
    else:
        output = FORMATS[output_format](result, options, quiet=quiet or nothing, statistics=statistics)
        if output_file:
            _write_report(output_file, output)
        elif output:
            if output_format in ("text", "concise") and colour.wanted(color, sys.stderr if to_stderr else sys.stdout):
                output = colour.paint(output)
            click.echo(output, err=to_stderr, color=True)
    if show_fixes and result.fixed_by_file:
        click.echo(_fixes_applied(result), err=to_stderr)
    for error in result.errors:
        click.echo(error, err=True)

    if result.errors:
        sys.exit(EXIT_ERROR)
    if nothing and not (force_exclude and paths and all(path == "-" or os.path.isfile(path) for path in paths)):
        # (under --force-exclude, named files that the excludes drop are what was asked: pre-commit,
        # and so is a --stdin-filename they drop)
        named = ", ".join(paths) if paths else "the current folder"
        click.echo(f"warning: no Python files found under {named}", err=True)
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
        raise click.UsageError("`-` (standard input) cannot be combined with other paths")
    if stdin_filename and not stdin:
        raise click.UsageError("--stdin-filename names the source given on standard input: pass `-` as the path")
    if add_noqa and (fix or diff or stdin):
        raise click.UsageError("--add-noqa edits the files named; it cannot be combined with --fix, --diff or `-`")
    if show_fixes and not fix:
        raise click.UsageError("--show-fixes lists the fixes applied: use it with --fix or --fix-only")


def _add_noqa(result, quiet: bool) -> int:
    """Write the directives that silence every finding; the exit code (2 where a file could not
    be linted or written, else 0: nothing is left to report)."""
    from torchnumlint.noqa_edit import add_noqa
    from torchnumlint.rules.registry import registry

    meta = [code for code, rule in registry().items() if rule.meta]  # a noqa for an unused noqa is no fix
    added, errors = add_noqa(result.findings, skip=meta)
    if not quiet:
        click.echo(f"Added {added} noqa {'directive' if added == 1 else 'directives'}.", err=True)
    for error in result.errors + errors:
        click.echo(error, err=True)
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
        click.echo(f"torchnumlint: cannot write the report to {path}: {exc.strerror}", err=True)
        sys.exit(EXIT_ERROR)


@click.command("clean", context_settings=_HELP)
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Also remove this cache folder.")
def clean_command(cache_dir: Optional[str]) -> None:
    """Remove torchnumlint's cache folders (.torchnumlint_cache) below the current folder."""
    from torchnumlint.clean import remove_caches

    removed = remove_caches(".", extra=cache_dir)
    for folder in removed:
        click.echo(f"Removed {folder}", err=True)
    if not removed:
        click.echo("No cache to remove.", err=True)


@click.command("server", context_settings=_HELP)
def server_command() -> None:
    """Run the language server on standard input/output (editors; needs torchnumlint[server])."""
    try:
        from torchnumlint.server import main as serve
    except ImportError as exc:
        click.echo(f'torchnumlint server needs pygls: pip install ".[server]" in a clone of torchnumlint ({exc})', err=True)
        sys.exit(EXIT_ERROR)
    serve()


@click.command("rule", context_settings=_HELP)
@click.argument("code", required=False)
@click.option("--all", "every", is_flag=True, help="List every rule (code, name, default, fix).")
def rule_command(code: Optional[str], every: bool) -> None:
    """Print the documentation of rule CODE (e.g. TNL101), or with --all the table of every rule."""
    if every == bool(code):
        raise click.UsageError("give a rule CODE or --all")
    if every:
        from torchnumlint.docs import rules_table
        from torchnumlint.rules.registry import all_rules

        click.echo(rules_table(all_rules()))
        return
    from torchnumlint.docs import explain

    click.echo(explain(_rule_or_fail(code or "")))


@click.command(
    "verify",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def verify(ctx: click.Context) -> None:
    """Run every rule's reproduction on this machine's device (see `torchnumlint verify --help`)."""
    try:
        from torchnumlint.runtime_check.cli import main as runtime_main

        code = runtime_main(list(ctx.args))
    except ModuleNotFoundError as exc:  # torch is imported once the arguments are read
        if (exc.name or "").split(".")[0] != "torch":
            raise  # a bug in torchnumlint: its traceback is the report
        click.echo(f'torchnumlint verify needs torch: pip install ".[runtime]" in a clone of torchnumlint ({exc})', err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(code)


COMMANDS = {"rule": rule_command, "verify": verify, "server": server_command, "clean": clean_command}


def main(argv: Optional[Sequence[str]] = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="torchnumlint")
