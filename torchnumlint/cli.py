"""The `torchnumlint` command: options -> Config -> run -> report -> exit code."""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

import click

from torchnumlint import __version__
from torchnumlint.report import FORMATS  # the reporters import neither libcst nor the engine

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _split(values: Sequence[str]) -> List[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


class _DefaultGroup(click.Group):
    """`torchnumlint PATHS...` means `torchnumlint check PATHS...`, as users of ruff/flake8 expect."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if not args or args[0] not in self.commands:
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup)
def cli() -> None:
    """Find and fix numerically unsafe PyTorch code."""


def _rule_or_fail(code: str):
    from torchnumlint.rules.registry import registry

    rule = registry().get(code.strip().upper())
    if rule is None:
        raise click.BadParameter(f"unknown rule {code!r} (see --list-rules)")
    return rule


@cli.command(
    "check",
    epilog="Other commands: `torchnumlint rule CODE` (a rule's docs), `torchnumlint verify` "
    "(prove every rule at runtime on this machine's device; needs torch).",
)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes that change results.")
@click.option("--diff", is_flag=True, help="Print the changes --fix would make; write nothing.")
@click.option(
    "--strict/--no-strict",
    default=None,
    help="Also report what can be a hazard without evidence in the code that it is reached "
    "(a division by any sum or norm, a root of any variance).",
)
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the default set).")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable in addition.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--output-format", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="text: each finding with its source line and fix; concise: one line each; json; sarif "
              "(GitHub code scanning); github (workflow annotations); gitlab (Code Quality); junit.")
@click.option("--output-file", type=click.Path(dir_okay=False, writable=True),
              help="Write the report to this file instead of standard output.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Read settings from this file.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--statistics", is_flag=True, help="Count findings per rule.")
@click.option("-q", "--quiet", is_flag=True, help="Findings only, no summary.")
@click.option("--list-rules", is_flag=True, help="List every rule and exit.")
@click.option("--explain", metavar="CODE", help="Print a rule's documentation and exit.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: every CPU).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="Keep the cache here (default: .torchnumlint_cache in each project's root).",
)
@click.version_option(__version__, "--version", prog_name="torchnumlint")
def check(paths, fix, unsafe_fixes, diff, strict, select, extend_select, ignore, output_format, output_file,
          config_path, exit_zero, statistics, quiet, list_rules, explain, jobs, no_cache, cache_dir) -> None:
    """Lint PATHS (files or folders; default: the current folder) for numerically unsafe PyTorch."""
    # the rules (and libcst) are imported only where needed: a fully cached run never needs them
    from torchnumlint import config as configuration
    from torchnumlint.runner import Options, run
    from torchnumlint.workers import default_jobs

    if explain:
        from torchnumlint.docs import explain as explain_rule

        click.echo(explain_rule(_rule_or_fail(explain)))
        return
    if list_rules:
        from torchnumlint.docs import rules_table
        from torchnumlint.rules.registry import all_rules

        click.echo(rules_table(all_rules()))
        return
    options = Options(
        fix=fix, diff=diff, unsafe_fixes=unsafe_fixes, strict=strict, jobs=jobs or default_jobs(),
        cache=not no_cache, cache_dir=cache_dir,
    )
    try:
        overrides = configuration.Overrides(
            select=tuple(_split(select)) or None,
            extend_select=tuple(_split(extend_select)),
            ignore=tuple(_split(ignore)),
        )
        for selector in (overrides.select or ()) + overrides.extend_select + overrides.ignore:
            configuration.check_selector(selector, "command line")
        # each file's settings come from the config nearest to it, read as the run reaches it
        result = run(list(paths) or ["."], configuration.Settings(overrides, config_path), options=options)
    except configuration.ConfigError as exc:
        click.echo(f"torchnumlint: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if unsafe_fixes is None:  # the files' configs decided: findings are marked fixable as they did
        options.unsafe_fixes = result.unsafe_fixes

    if diff:
        click.echo("".join(result.diffs), nl=False)
    else:
        output = FORMATS[output_format](result, options, quiet=quiet, statistics=statistics)
        if output_file:
            _write_report(output_file, output)
        elif output:
            click.echo(output)
    for error in result.errors:
        click.echo(error, err=True)

    if result.errors:
        sys.exit(EXIT_ERROR)
    if exit_zero:
        sys.exit(EXIT_CLEAN)
    if diff:
        sys.exit(EXIT_FINDINGS if result.diffs else EXIT_CLEAN)
    sys.exit(EXIT_FINDINGS if result.findings else EXIT_CLEAN)


def _write_report(path: str, output: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(output + ("\n" if output and not output.endswith("\n") else ""))
    except OSError as exc:
        click.echo(f"torchnumlint: cannot write the report to {path}: {exc.strerror}", err=True)
        sys.exit(EXIT_ERROR)


@cli.command("server")
def server_command() -> None:
    """Run the language server on standard input/output (editors; needs torchnumlint[server])."""
    try:
        from torchnumlint.server import main as serve
    except ImportError as exc:
        click.echo(f"torchnumlint server needs pygls: pip install 'torchnumlint[server]' ({exc})", err=True)
        sys.exit(EXIT_ERROR)
    serve()


@cli.command("rule")
@click.argument("code")
def rule_command(code: str) -> None:
    """Print the documentation of rule CODE (e.g. TNL101)."""
    from torchnumlint.docs import explain

    click.echo(explain(_rule_or_fail(code)))


@cli.command(
    "verify",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def verify(ctx: click.Context) -> None:
    """Run every rule's reproduction on this machine's device (see `torchnumlint verify --help`)."""
    try:
        from torchnumlint.runtime_check.cli import main as runtime_main
    except ImportError as exc:
        click.echo(f"torchnumlint verify needs torch: pip install 'torchnumlint[runtime]' ({exc})", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(runtime_main(list(ctx.args)))


def main(argv: Optional[Sequence[str]] = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="torchnumlint")
