"""The `torchnumlint` command: options -> Config -> run -> report -> exit code.

`torchnumlint [OPTIONS] [PATHS]...` lints, and so does `torchnumlint check [OPTIONS] [PATHS]...`
(ruff's spelling: the word is dropped); `torchnumlint rule CODE` / `rule --all` prints rule docs,
`torchnumlint verify` proves the rules at runtime, `torchnumlint server` is the language server,
`torchnumlint clean` removes the cache. A first word naming a command runs it; a folder named
like a command is linted after `--` (`torchnumlint -- server`) or after `check`.

Every lint option can also come from a `TORCHNUMLINT_<OPTION>` environment variable
(`TORCHNUMLINT_OUTPUT_FORMAT=concise`); the command line wins over it.

click reads the options (`commands.py`), but it is imported only when there are options with
values to read: a pre-commit hook or an editor runs `torchnumlint FILE...` again and again
(pre-commit with its hook's flags, `--force-exclude`, `--fix`), and importing click costs about as
much as starting the interpreter. A command line of paths and `_FLAGS` alone (no other word
starting with `-`, no command word, no TORCHNUMLINT_* variable) sets nothing else, so `main` calls
`lint` with those flags and every other option at its default, as click would (a test holds
`lint`'s defaults equal to click's, and each flag read as click reads it). None of those flags
can make a usage error, the one thing for which `lint` imports click.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torchnumlint.lint_command import COMMAND_NAMES, EXIT_FINDINGS, echo, lint


def main(argv: Optional[Sequence[str]] = None) -> None:
    """The console script: `lint` straight away for a command line of paths and flags alone, else click."""
    args = list(sys.argv[1:] if argv is None else argv)
    plain = _plain_command_line(args)
    if plain is None:
        from torchnumlint.commands import cli

        cli.main(args=args, prog_name="torchnumlint")
        return
    paths, flags = plain
    try:
        lint(tuple(paths), **flags)
    except KeyboardInterrupt:  # as click's standalone mode ends a run: `Aborted!`, exit 1
        echo("\nAborted!", err=True)
        sys.exit(EXIT_FINDINGS)
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to write, exit 1 as click does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_FINDINGS)


# The lint options that take no value and cannot make a usage error (with any other options of
# this table): the word -> (`lint`'s parameter, the value click gives it). `--add-noqa` and
# `--show-fixes` are left to click, as they make one with `--fix` or without it.
_FLAGS: Dict[str, Tuple[str, bool]] = {
    "--fix": ("fix", True),
    "--unsafe-fixes": ("unsafe_fixes", True),
    "--no-unsafe-fixes": ("unsafe_fixes", False),
    "--fix-only": ("fix_only", True),
    "--diff": ("diff", True),
    "--strict": ("strict", True),
    "--no-strict": ("strict", False),
    "--isolated": ("isolated", True),
    "--force-exclude": ("force_exclude", True),
    "--exit-zero": ("exit_zero", True),
    "--exit-non-zero-on-fix": ("exit_non_zero_on_fix", True),
    "--statistics": ("statistics", True),
    "-q": ("quiet", True),
    "--quiet": ("quiet", True),
    "--no-cache": ("no_cache", True),
}


def _plain_command_line(args: List[str]) -> Optional[Tuple[List[str], Dict[str, Any]]]:
    """(the paths, the `_FLAGS` set: the last of a pair wins, as in click) of a command line that
    sets nothing else (after an optional `check`); None when click must read it: another word
    starting with `-` (an option with a value, `--`, `-` for standard input, `--help`), a command
    word first, an environment variable click reads (TORCHNUMLINT_<OPTION>, _TORCHNUMLINT_COMPLETE
    for shell completion), or Windows (click expands globs there)."""
    if args and args[0] == "check":
        args = args[1:]
    elif args and args[0] in COMMAND_NAMES:
        return None
    if os.name == "nt" or any("TORCHNUMLINT_" in name for name in os.environ):
        return None
    paths: List[str] = []
    flags: Dict[str, Any] = {}  # (`lint`'s keyword arguments, its flags' among them)
    for arg in args:
        if arg in _FLAGS:
            name, value = _FLAGS[arg]
            flags[name] = value
        elif arg.startswith("-"):
            return None
        else:
            paths.append(arg)
    return paths, flags
