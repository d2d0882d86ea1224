"""The `torchnumlint` command: options -> Config -> run -> report -> exit code.

`torchnumlint [OPTIONS] [PATHS]...` lints, and so does `torchnumlint check [OPTIONS] [PATHS]...`
(ruff's spelling: the word is dropped); `torchnumlint rule CODE` / `rule --all` prints rule docs,
`torchnumlint verify` proves the rules at runtime, `torchnumlint server` is the language server,
`torchnumlint clean` removes the cache. A first word naming a command runs it; a folder named
like a command is linted after `--` (`torchnumlint -- server`) or after `check`.

Every lint option can also come from a `TORCHNUMLINT_<OPTION>` environment variable
(`TORCHNUMLINT_OUTPUT_FORMAT=concise`); the command line wins over it.

click reads the options (`commands.py`), but it is imported only when there are options to read:
a pre-commit hook or an editor runs `torchnumlint FILE...` again and again, and importing click
costs about as much as starting the interpreter. A command line of paths alone (no word starting
with `-`, no command word, no TORCHNUMLINT_* variable) means every option at its default, so
`main` calls `lint` with its defaults, which are the options' defaults (a test holds them equal);
`lint` imports click only to raise a usage error, which only options can cause.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional, Sequence

from torchnumlint.lint_command import COMMAND_NAMES, EXIT_FINDINGS, echo, lint


def main(argv: Optional[Sequence[str]] = None) -> None:
    """The console script: `lint` straight away for a command line of paths alone, else click."""
    args = list(sys.argv[1:] if argv is None else argv)
    paths = _paths_alone(args)
    if paths is None:
        from torchnumlint.commands import cli

        cli.main(args=args, prog_name="torchnumlint")
        return
    try:
        lint(tuple(paths))
    except KeyboardInterrupt:  # as click's standalone mode ends a run: `Aborted!`, exit 1
        echo("\nAborted!", err=True)
        sys.exit(EXIT_FINDINGS)
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to write, exit 1 as click does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_FINDINGS)


def _paths_alone(args: List[str]) -> Optional[List[str]]:
    """The paths of a command line that sets nothing but paths (after an optional `check`); None
    when click must read it: a word starting with `-` (an option, `--`, `-` for standard input),
    a command word first, an environment variable click reads (TORCHNUMLINT_<OPTION>,
    _TORCHNUMLINT_COMPLETE for shell completion), or Windows (click expands globs there)."""
    if args and args[0] == "check":
        args = args[1:]
    elif args and args[0] in COMMAND_NAMES:
        return None
    if os.name == "nt" or any(arg.startswith("-") for arg in args) or any("TORCHNUMLINT_" in name for name in os.environ):
        return None
    return args
