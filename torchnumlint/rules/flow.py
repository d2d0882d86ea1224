"""Reaching definitions within one function: every binding of a name that may give it its value
at a use, through straight-line rebinding, `if`/`elif`/`else`, loops (a binding later in a loop
body reaches the top of the next iteration), `try`/`except`/`finally`, `with` and `match`.

A question about a value that several assignments may give ("is it a softmax?", "is it
guarded?") can then require all of them to agree, where following only the one binding that
surely reaches (`ScopeTable.lookup`) has to give up. Code after `return`, `raise`, `break` or
`continue` is unreachable and gets no answer.

The analysis reads the bindings `ScopeTable` records (each with the statement that makes it) and
walks the statements once per loop iteration until nothing changes; it runs only when a rule
asks, once per scope.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Sequence

import libcst as cst

# name -> indices into ScopeTable.bindings[name] that may reach; None: unreachable code
State = Dict[str, FrozenSet[int]]


def _merge(*states: Optional[State]) -> Optional[State]:
    live = [s for s in states if s is not None]
    if not live:
        return None
    merged: Dict[str, FrozenSet[int]] = dict(live[0])
    for state in live[1:]:
        for name, found in state.items():
            merged[name] = merged.get(name, frozenset()) | found
    return merged


class _Loop:
    """Where `break` and `continue` send their states."""

    def __init__(self) -> None:
        self.breaks: List[State] = []
        self.continues: List[State] = []


class Reaching:
    """The state at the entry of every statement of a scope (`entry`), from which `at` answers
    for one use."""

    def __init__(self, table) -> None:  # a bindings.ScopeTable (names imports this module)
        self.table = table
        self.entry: Dict[int, State] = {}
        # each statement's own bindings, in order: (name, index into table.bindings[name])
        self.made: Dict[int, List[tuple]] = {}
        initial: Dict[str, FrozenSet[int]] = {}
        for name, found in table.bindings.items():
            for index, binding in enumerate(found):
                if binding.statement:
                    self.made.setdefault(binding.statement, []).append((binding.order, name, index))
                else:
                    initial[name] = frozenset({index})  # a parameter
        for made in self.made.values():
            made.sort(key=lambda item: item[0])
        self._loops: List[_Loop] = []
        self._tries: List[List[State]] = []  # states seen inside each enclosing `try` body
        scope = table.scope
        body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
        self._block(body, initial)

    def at(self, name: str, use: cst.Name) -> Optional[List[int]]:
        """Indices of the bindings of `name` that may reach `use`; None when the use is in
        unreachable code or outside the scope's own statements (a lambda, a nested function)."""
        statement = self.table.statement_of.get(id(use))
        state = self.entry.get(statement) if statement is not None else None
        if state is None:
            return None
        use_order = self.table.order[id(use)]
        found = set(state.get(name, ()))
        for order, bound, index in self.made.get(statement, ()):
            if bound != name:
                continue
            if isinstance(self.table.bindings[name][index].node, cst.CompFor):
                return None  # `[log(p) for p in ps]`: the comprehension's own `p`
            if order < use_order:  # `(p := f(x)) + p`, an in-place call before the use
                found = self._apply(found, index, name)
        return sorted(found)

    # -- the walk -------------------------------------------------------------------------------
    def _apply(self, found, index: int, name: str):
        binding = self.table.bindings[name][index]
        return set(found) | {index} if binding.conditional else {index}

    def _record(self, node: cst.CSTNode, state: State) -> None:
        self.entry[id(node)] = state
        for seen in self._tries:
            seen.append(state)

    def _gen(self, node: cst.CSTNode, state: State) -> State:
        made = self.made.get(id(node))
        if not made:
            return state
        state = dict(state)
        for _, name, index in made:
            state[name] = frozenset(self._apply(state.get(name, ()), index, name))
        return state

    def _block(self, body: Sequence[cst.CSTNode], state: Optional[State]) -> Optional[State]:
        for stmt in body:
            if state is None:
                return None
            state = self._statement(stmt, state)
        return state

    def _suite(self, suite: cst.BaseSuite, state: Optional[State]) -> Optional[State]:
        return self._block(suite.body, state)

    def _statement(self, stmt: cst.CSTNode, state: State) -> Optional[State]:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self._block(stmt.body, state)
        self._record(stmt, state)
        if isinstance(stmt, (cst.Return, cst.Raise)):
            return None
        if isinstance(stmt, (cst.Break, cst.Continue)):
            if self._loops:
                loop = self._loops[-1]
                (loop.breaks if isinstance(stmt, cst.Break) else loop.continues).append(state)
            return None
        if isinstance(stmt, cst.If):
            state = self._gen(stmt, state)
            taken = self._suite(stmt.body, state)
            if stmt.orelse is None:
                return _merge(taken, state)
            if isinstance(stmt.orelse, cst.If):
                return _merge(taken, self._statement(stmt.orelse, state))
            return _merge(taken, self._suite(stmt.orelse.body, state))
        if isinstance(stmt, (cst.For, cst.While)):
            return self._loop(stmt, state)
        if isinstance(stmt, cst.Try) or type(stmt).__name__ == "TryStar":
            return self._try(stmt, state)
        if isinstance(stmt, cst.With):
            return self._suite(stmt.body, self._gen(stmt, state))
        if isinstance(stmt, cst.Match):
            state = self._gen(stmt, state)
            outs: List[Optional[State]] = [state]
            for case in stmt.cases:
                self._record(case, state)
                outs.append(self._suite(case.body, self._gen(case, state)))
            return _merge(*outs)
        # small statements, nested functions and classes: their own bindings
        return self._gen(stmt, state)

    def _loop(self, stmt, before: State) -> Optional[State]:
        """The head's state is the entry's and every iteration's end (and `continue`s); repeat
        until it stops growing (each pass can only add bindings)."""
        head: State = before
        for _ in range(len(self.table.order) + 1):
            loop = _Loop()
            self._loops.append(loop)
            if isinstance(stmt, cst.While):
                self._record(stmt, head)  # the test runs at every iteration's head
                body_in = self._gen(stmt, head)
            else:
                self._record(stmt, before)  # the iterable is read once, before the loop
                body_in = self._gen(stmt, head)  # the target, bound at every iteration
            end = self._suite(stmt.body, body_in)
            self._loops.pop()
            grown = _merge(before, end, *loop.continues)
            if grown == head:
                break
            head = grown  # type: ignore[assignment]  # a merge of states is a state
        done = self._suite(stmt.orelse.body, head) if stmt.orelse is not None else head
        return _merge(done, *loop.breaks)

    def _try(self, stmt, state: State) -> Optional[State]:
        """A handler can start from any state of the `try` body; `finally` from any way out."""
        seen: List[State] = [state]
        self._tries.append(seen)
        body = self._suite(stmt.body, state)
        self._tries.pop()
        anywhere = _merge(*seen, body)
        outs: List[Optional[State]] = [self._suite(stmt.orelse.body, body) if stmt.orelse is not None else body]
        for handler in stmt.handlers:
            self._record(handler, anywhere)  # type: ignore[arg-type]  # a try's handlers are ExceptHandlers or ExceptStarHandlers alike
            outs.append(self._suite(handler.body, self._gen(handler, anywhere)))  # type: ignore[arg-type]  # a try's handlers are ExceptHandlers or ExceptStarHandlers alike
        out = _merge(*outs)
        if stmt.finalbody is None:
            return out
        final = self._suite(stmt.finalbody.body, _merge(out, anywhere))
        return final if out is not None else None
