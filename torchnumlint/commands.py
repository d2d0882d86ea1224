"""The commands' options, as click reads them: `torchnumlint [OPTIONS] [PATHS]...` (and `check`),
`rule`, `verify`, `server`, `clean`.

Kept apart from `cli.py`, which is the entry point: importing click costs a start-up about as long
as the interpreter's own, and a plain `torchnumlint FILE...` (no option, no TORCHNUMLINT_*
variable) needs none of it (`cli.main`). The lint command's work is `lint_command.lint`, whatever read its
options; its parameters' defaults are the options' defaults here (a test holds them equal).
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

import click

from torchnumlint import __version__
from torchnumlint.lint_command import COMMAND_NAMES, EXIT_ERROR, lint
from torchnumlint.report import FORMATS  # the reporters import neither libcst nor the engine


def _rule_or_fail(code: str):
    from torchnumlint.rules.registry import registry

    rule = registry().get(code.strip().upper())
    if rule is None:
        raise click.BadParameter(f"unknown rule {code!r} (see `torchnumlint rule --all`)")
    return rule


_HELP = {"help_option_names": ["-h", "--help"]}


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
    help=lint.__doc__,
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
@click.option(
    "--max-lint-size",
    type=click.IntRange(min=0),
    help="Lint no file larger than this many bytes; each one left out is named (default: the "
    "config's max-lint-size, else 1000000; 0: no limit). LibCST's tree of a file costs 50-1,250x its size in memory.",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="Keep the cache here (default: .torchnumlint_cache in each project's root).",
)
@click.version_option(__version__, "--version", prog_name="torchnumlint")
def cli(**values: Any) -> None:
    lint(**values)


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


COMMANDS = dict(zip(COMMAND_NAMES, (rule_command, verify, server_command, clean_command)))
