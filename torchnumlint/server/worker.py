"""The lint process: the server's linting runs here, apart from the process that talks to the editor.

Why a process of its own: the editor process stays light (it never imports libcst, so it answers
`initialize` at once) and keeps answering hovers and code actions while a lint runs; a lint that
runs past its time limit on a huge buffer can be stopped, memory and all, by ending this process
(`linter.py` starts a fresh one); and the project facts live here, between edits (`facts.py`).

Requests (`messages.py`) come one at a time; between them, while no request waits, the facts of a
project are gathered a file at a time, so a lint never waits for more than one file's worth.

A lint of the text last linted for a path, with the same rules, strictness and the very index
object (`facts.py` hands back the same one while nothing it was made from changed), is answered
with the last findings: an editor lints a buffer again when it is saved, and on a save the
buffer's kept index stays valid (a 60 KB diffusers file: ~1 s of CPU saved per save).
"""

from __future__ import annotations

import gc
import os
import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Tuple, cast

from torchnumlint.server import messages
from torchnumlint.server.facts import KEPT_INDEXES, Projects
from torchnumlint.server.relint import Relinter

KEPT_ANSWERS = KEPT_INDEXES  # the last findings of as many buffers as indexes are kept


def serve(conn: Connection) -> None:
    """Answer the server's requests on `conn` until it closes."""
    os.dup2(2, 1)  # standard output is the editor's channel in the server; here nothing goes there
    from torchnumlint.docs import explain
    from torchnumlint.rules.registry import registry

    conn.send(messages.Ready({code: explain(rule) for code, rule in registry().items()}))
    worker = _Worker(conn)
    while True:
        gathering = worker.projects.gathering()
        if gathering is not None and not conn.poll(0):
            worker.gather(gathering)
            continue
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        worker.handle(message)


class _Worker:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.projects = Projects()
        # path -> (what its last lint was given: text, rules, strict, facts; the index; its answer)
        self._linted: "OrderedDict[str, Tuple[tuple, object, messages.Linted]]" = OrderedDict()
        self.relinter = Relinter(KEPT_ANSWERS)  # after an edit, only what it can reach is linted again

    def gather(self, facts) -> None:
        from torchnumlint.config import ConfigError, Settings

        try:
            done = facts.step(Settings())
        except ConfigError:  # a folder's config is bad: the facts gathered so far stand, and the
            done = facts.complete = True  # lints of the files under it say what is wrong
        except Exception as exc:  # a bug in torchnumlint (gathering again would meet it again)
            done = facts.complete = True
            self.bug(f"gathering the facts of {facts.root}", exc)
        if done:
            # the facts live as long as the process: the collector need not walk them again on
            # every full collection (a lint's worst case went from 258 ms to 80 ms on diffusers)
            gc.collect()
            gc.freeze()
            self.conn.send(messages.FactsReady(str(facts.root), len(facts.parts), facts.seconds))

    def bug(self, doing: str, exc: Exception) -> None:
        """Say (unasked) that torchnumlint broke while `doing` something."""
        self.conn.send(messages.Refused("failed", f"internal error in torchnumlint (please report it), {doing}: {exc!r}"))

    def handle(self, message: object) -> None:
        if isinstance(message, messages.Saved):
            facts = self.projects.known(message.path)
            try:
                if facts is not None and message.text is None:
                    facts.refresh(message.path)
                elif facts is not None:
                    facts.update(message.path, message.text)
            except Exception as exc:  # the file's facts stay as they were
                self.bug(f"reading the facts of {message.path}", exc)
            return
        number, request = cast(Tuple[int, object], message)  # any other message is a numbered request
        try:
            result = self.answer(request)
        except Exception as exc:  # a bug in torchnumlint: say so, keep serving
            result = messages.Refused("failed", f"internal error in torchnumlint (please report it): {exc!r}")
        self.conn.send(messages.Reply(number, result))

    def answer(self, request: object) -> object:
        from torchnumlint.config import ConfigError, Settings
        from torchnumlint.discovery import discover
        from torchnumlint.engine import ParseError, check_syntax
        from torchnumlint.relint_scope import Snapshot
        from torchnumlint.fixes import fix_text
        from torchnumlint.runner import file_options, reads_project_index
        from torchnumlint.results import Options

        assert isinstance(request, (messages.Lint, messages.FixAll))
        path, text = request.path, request.text
        try:
            settings = Settings()
            if os.path.isfile(path) and not discover([path], settings, force_exclude=True)[0]:
                return messages.Refused("excluded")
            rules = settings.rules_for(path)
            options = file_options(Options(), settings, path)
        except ConfigError as exc:
            return messages.Refused("config", str(exc))
        try:
            tree = check_syntax(text, path)
        except ParseError as exc:
            return messages.Refused("syntax", str(exc))
        index, project, basis = None, True, None
        if reads_project_index(text, rules):
            facts = self.projects.of(path)
            if facts is not None and facts.complete:
                index = facts.index_for(path, text)
                basis = facts.basis(path)
            else:
                project = facts is None  # a file in no project is its own project
        started = time.monotonic()
        given = (text, tuple(rules), bool(options.strict), project)
        try:
            if isinstance(request, messages.Lint):
                last = self._linted.get(path)
                if last is not None and last[0] == given and last[1] is index:
                    return last[2]
                found = self.relinter.lint(path, Snapshot(text, tree), rules, index, basis, bool(options.strict), request.time_limit)
                linted = messages.Linted(found, project)
                self._linted[path] = (given, index, linted)
                self._linted.move_to_end(path)
                if len(self._linted) > KEPT_ANSWERS:
                    self._linted.popitem(last=False)
                return linted
            fixed = fix_text(path, text, rules, index, unsafe=bool(options.unsafe_fixes), strict=bool(options.strict))
            return messages.Fixed(fixed.text, fixed.applied, bool(options.unsafe_fixes))
        except ParseError as exc:
            if isinstance(request, messages.Lint) and time.monotonic() - started >= request.time_limit:
                return messages.Refused("gave-up", f"no result within {request.time_limit:g} s")
            return messages.Refused("failed", str(exc))
