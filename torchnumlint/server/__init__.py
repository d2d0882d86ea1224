"""The language server (`torchnumlint server`, the `server` extra: pygls): findings as the editor
types, each fix one click away.

Over stdio, as editors start language servers. A document is linted when it is opened, changed
(after a short pause) and saved; its findings are published as diagnostics (a warning each, with
the rule's code, a link to its documentation and, on hover, the documentation itself). Code
actions: each finding's fix (an UNSAFE fix says so in its title: it changes results, which `--fix`
applies only with `--unsafe-fixes`), `# noqa: CODE` for its line, and every fix `--fix` would make
at once (`source.fixAll.torchnumlint`, what editors run on save). Closing a document clears its
diagnostics.

Each document gets what its path would get on the command line: the nearest `[tool.torchnumlint]`
(read again at each lint, so an edited pyproject.toml applies at once), its selection,
per-file-ignores, `strict` and `unsafe-fixes`; a file the configuration excludes gets no
diagnostics. Findings that need other files of the project (a helper returning a softmax) come
from the project's facts, gathered once and kept in memory (`facts.py`).

Client settings (initializationOptions or workspace/didChangeConfiguration, at the top level or
under "torchnumlint"): `debounce`, the seconds of quiet after a change before it is linted
(default 0.05); `timeLimit`, the seconds a lint or fix-all may take (default 10): past it the
server gives the buffer up, says so (window/showMessage) and keeps its last diagnostics.

The pieces: `app.py` (the editor's side: documents, debounce, publishing, code actions, hover),
`lsp.py` (findings in LSP terms), `linter.py` and `worker.py` (the lint process, which holds the
facts: `facts.py`, with the other files' call sites in `calls.py`), `messages.py` (what they say to each other), `rule_docs.py` (the docs links). This
package imports neither pygls nor libcst until asked: the lint process imports `worker.py` alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pygls  # noqa: F401  the `server` extra, asked for here (its top package is two lines) so that
# `torchnumlint server` without it fails at once with the CLI's one-line hint, not later in `main`

if TYPE_CHECKING:
    from torchnumlint.server.app import TorchNumLintServer


def create_server() -> "TorchNumLintServer":
    """A server with its handlers (a fresh one per session)."""
    from torchnumlint.server.app import create_server as create

    return create()


def main() -> None:
    """Serve one editor over stdio until it exits."""
    from torchnumlint.server.app import main as serve

    serve()
