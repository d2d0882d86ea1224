"""The calls of a function across the project: who passes a parameter its value.

A parameter's kind is what its callers pass (a softmax, a mask that selects, logits with a
gradient): `callers(ctx)` gives the call sites of the function being visited, each a `Caller`:
the context of the caller's file and the path of ancestors of the call, which `ctx.visiting`
takes, so a question asked of an argument is asked where it is written. `Caller.argument` is
the argument a call passes for a parameter; `Caller.where` names the call in a message.

In the function's own file a module-level function is called by its bare name, a method through
`self.`/`cls.` inside its class (`CallSites`). From other files (and through instances in its
own), the calls recorded in the project's `ast` summaries (`Summaries.callers`: imported names,
module attributes, relative imports, instances of project classes, `self.attr` modules) are
found in the caller's file, parsed with LibCST once per process (`_parsed`, a bounded cache).
A function handed on instead of called counts as called where it is called later, with that
call's arguments (`CallSites.through`, in its own file): passed to a module-level function of the
file and called there through the parameter (`run(loss_fn=my_kl)` ... `loss_fn(p, q)`), kept in
`self.attr` and called as `self.attr(p, q)`, or in a name of the same function (`criterion =
partial(my_kl, reduction="sum")` ... `criterion(p, q)`). From another file, a function that a
class's `__init__` keeps in `self.attr` (itself or a keyword `functools.partial`) is called by
`self.attr(p, q)` there (`summaries`). Not followed: `map`, a function handed on twice, and a
function passed to a function of another file.

Depth 1: a caller's own parameters are not followed to its callers. At most `MAX_ELSEWHERE`
callers from other files are judged (the first by path and line).

A finding judged at another file's caller depends on that file: the result cache keys every
file that reads the project index by the fingerprint of all the files that can hold facts
(`summaries.could_matter`), and any file that imports and calls is one.
"""

from __future__ import annotations

import functools
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import libcst as cst

from torchnumlint import prepass
from torchnumlint.positions import Spans
from torchnumlint.rules.bindings import all_params
from torchnumlint.walk import Visitor
from torchnumlint.workers import NeedsWorker, processing_here

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

MAX_ELSEWHERE = 8  # callers in other files judged per function
_MAX_BYTES = 2_000_000  # a caller's file larger than this is not parsed


class CallSites(Visitor):
    """Every call in a module by what it calls, with its ancestors: a module-level function by
    its bare name (`f(...)`), a method by `self.f(...)` / `cls.f(...)` inside its own class (an
    unrelated `log.f(...)` is not a call of either). And where a function is handed on, not
    called: passed by name to a module-level function of the file (`train(model, loss_fn=f)`,
    `apply(f)`: `passed`), kept in an attribute (`self.loss_fn = f`: `kept`) or a name
    (`criterion = f`: `aliases`), there also as `functools.partial(f, key=value)` (keywords only:
    the positions of the later call's arguments are f's own)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.stack: List[cst.CSTNode] = []
        self.functions: Dict[str, List[Tuple[cst.CSTNode, ...]]] = {}
        self.methods: Dict[Tuple[int, str], List[Tuple[cst.CSTNode, ...]]] = {}
        self.passed: Dict[str, List[Tuple[str, cst.Call, cst.Arg]]] = {}  # f -> (g, the call of g, the argument f)
        self.kept: Dict[str, List[Tuple[int, str]]] = {}  # f -> (the class, attr) of `self.attr = f`
        self.aliases: Dict[str, List[Tuple[str, cst.CSTNode]]] = {}  # f -> (name, its scope) of `name = f`
        self.walk(module)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name):
                self.functions.setdefault(func.value, []).append(tuple(self.stack))
                for arg in node.args:
                    if isinstance(arg.value, cst.Name) and not arg.star:
                        self.passed.setdefault(arg.value.value, []).append((func.value, node, arg))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
                cls = next((n for n in reversed(self.stack) if isinstance(n, cst.ClassDef)), None)
                if cls is not None:
                    self.methods.setdefault((id(cls), func.attr.value), []).append(tuple(self.stack))
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            handed = _handed(node.value)
            target = node.targets[0].target
            if handed is None:
                pass
            elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                cls = next((n for n in reversed(self.stack) if isinstance(n, cst.ClassDef)), None)
                if cls is not None:
                    self.kept.setdefault(handed, []).append((id(cls), target.attr.value))
            elif isinstance(target, cst.Name):
                scope = next((n for n in reversed(self.stack) if isinstance(n, (cst.FunctionDef, cst.Module))), None)
                if scope is not None:
                    self.aliases.setdefault(handed, []).append((target.value, scope))
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self.stack.pop()

    def of(self, function: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> List[Tuple[cst.CSTNode, ...]]:
        """The calls of `function` (a method of `cls`, or a module-level function when None)."""
        if cls is not None:
            return self.methods.get((id(cls), function.name.value), [])
        return self.functions.get(function.name.value, [])

    def through(self, module: cst.Module, function: cst.FunctionDef) -> List[Tuple[cst.CSTNode, ...]]:
        """The calls of the module-level `function` made through what it was handed to: `fn(a, b)`
        inside a module-level `g` of the file whose parameter `fn` a call passes it for, and
        `self.attr(a, b)` in a class that keeps it as `self.attr`. One step: a function handed on
        again (`g` passing `fn` to `h`) is not followed."""
        name = function.name.value
        found: List[Tuple[cst.CSTNode, ...]] = []
        defined = {d.name.value: d for d in module.body if isinstance(d, cst.FunctionDef)}
        for callee, call, arg in self.passed.get(name, []):
            receiver = defined.get(callee)
            if receiver is None or receiver is function:
                continue
            param = next((p for p in all_params(receiver.params) if argument_for(call, receiver, p, False) is arg), None)
            if param is None:
                continue
            found.extend(path for path in self.functions.get(param.name.value, []) if any(n is receiver for n in path))
        for cls, attr in self.kept.get(name, []):
            found.extend(self.methods.get((cls, attr), []))
        for alias, scope in self.aliases.get(name, []):
            if alias != name:
                found.extend(path for path in self.functions.get(alias, []) if any(n is scope for n in path))
        return found


def _handed(value: cst.BaseExpression) -> Optional[str]:
    """The function name `value` hands on: `f`, or `partial(f, key=value)` / `functools.partial(
    f, ...)` whose other arguments are keywords; None otherwise."""
    if isinstance(value, cst.Name):
        return value.value
    if (
        not isinstance(value, cst.Call)
        or not value.args
        or not isinstance(value.args[0].value, cst.Name)
        or value.args[0].keyword is not None
    ):
        return None
    func = value.func
    named = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if named != "partial" or any(a.keyword is None or a.star for a in value.args[1:]):
        return None
    return value.args[0].value.value


def argument_for(call: cst.Call, function: cst.FunctionDef, param: cst.Param, bound: Optional[bool] = None) -> Optional[cst.Arg]:
    """The argument `call` passes for `param` of `function`; None when unknown (*args, **kwargs,
    not passed: the default). `bound`: whether the call binds the first parameter (`self`);
    None: as written, an attribute call of a method (`self.f(x)`)."""
    if any(a.star for a in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param.name.value:
            return arg
    ordered = list(function.params.posonly_params) + list(function.params.params)
    if param not in ordered:
        return None
    index = ordered.index(param)
    if bound is None:
        bound = isinstance(call.func, cst.Attribute) and bool(ordered) and ordered[0].name.value in ("self", "cls")
    index -= 1 if bound else 0
    positional = [a for a in call.args if a.keyword is None]
    return positional[index] if 0 <= index < len(positional) else None


@dataclass(frozen=True)
class Caller:
    """One call of the function being visited: `ctx` is its file's context (the function's own,
    or another file's), `path` the call's ancestors, the call last."""

    ctx: "FileContext"
    path: Tuple[cst.CSTNode, ...]
    bound: Optional[bool]  # see `argument_for`
    elsewhere: bool

    @property
    def call(self) -> cst.Call:
        return self.path[-1]  # type: ignore[return-value]

    def argument(self, function: cst.FunctionDef, param: Optional[cst.Param]) -> Optional[cst.Arg]:
        return argument_for(self.call, function, param, self.bound) if param is not None else None

    @property
    def where(self) -> str:
        """`line 12` in the function's own file, `train.py:46` in another."""
        span = self.ctx.positions.get(self.call)
        line = span.start.line if span is not None else 0
        return f"{self.ctx.path}:{line}" if self.elsewhere else f"line {line}"


def callers(ctx: "FileContext", elsewhere: bool = True) -> List[Caller]:
    """The call sites in the project of the function being visited (a method through its class,
    its instances and `self` attributes holding one); with `elsewhere` False only those of its
    own file that `CallSites` finds (no other file is read)."""
    function = ctx.enclosing(cst.FunctionDef)
    if function is None:
        return []
    at = ctx.stack.index(function)
    above = ctx.stack[at - 2] if at >= 2 else None
    cls = above if isinstance(above, cst.ClassDef) else None
    sites_here = ctx.per_file("call-sites", lambda c: CallSites(c.module))
    here = [Caller(ctx, path, None, False) for path in sites_here.of(function, cls)]
    toplevel = ctx.stack[at - 1] is ctx.module if cls is None else at >= 3 and ctx.stack[at - 3] is ctx.module
    if toplevel and cls is None:
        here += [Caller(ctx, path, False, False) for path in sites_here.through(ctx.module, function)]
    if not toplevel or not elsewhere:
        return here
    sites = ctx.index.summaries.callers(ctx.path, cls.name.value if isinstance(cls, cst.ClassDef) else None, function.name.value)
    others: List[Caller] = []
    for site in sites:
        if len(others) >= MAX_ELSEWHERE:
            break
        other = _context_of(ctx, site.path)
        if other is None:
            continue
        found = _pick(other[1].get((site.line, site.col), []), site.bound)
        if found is not None:
            others.append(Caller(other[0], found, site.bound, site.path != ctx.path))
    return here + others


def _pick(paths: List[Tuple[cst.CSTNode, ...]], bound: bool) -> Optional[Tuple[cst.CSTNode, ...]]:
    """Of the calls that start where a call site was recorded (outermost first), the one it
    records: not a method called on another call's result (`f(a).mean()`, `crit(a, b).sum()`),
    except a method of an object built there (`Head(d).predict(x)`, a bound call with
    arguments); `MyLoss()(a, b)` is the outer call."""
    for path in paths:
        call = cst.ensure_type(path[-1], cst.Call)
        chained = isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call)
        if not chained or (bound and call.args):
            return path
    return None


def _context_of(ctx: "FileContext", path: str) -> Optional[Tuple["FileContext", Dict[Tuple[int, int], List[Tuple[cst.CSTNode, ...]]]]]:
    """A context of the project file `path`, with its calls by `ast` position; None when it
    cannot be read or parsed. Once per file linted."""
    contexts = ctx.per_file("caller-files", lambda c: {})
    if path not in contexts:
        text = ctx.text if path == ctx.path else ctx.index.summaries.buffers.get(path)
        if text is None:
            text = _read(path)
        parsed = _parsed(path, text) if text is not None else None
        # the file's own text is parsed whole too: the linted tree may lack the caller (`candidates.py`)
        contexts[path] = (ctx.sibling(path, text, parsed[0]), parsed[1]) if text is not None and parsed is not None else None
    return contexts[path]


def _read(path: str) -> Optional[str]:
    """A project file's text as Python reads it (its coding cookie), None when it cannot be."""
    try:
        with tokenize.open(path) as f:
            text = f.read(_MAX_BYTES + 1)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    return text if len(text) <= _MAX_BYTES else None


@functools.lru_cache(maxsize=32)
def _parsed(path: str, text: str) -> Optional[Tuple[cst.Module, Dict[Tuple[int, int], List[Tuple[cst.CSTNode, ...]]]]]:
    """A caller's file parsed, with its calls by position: the same file is asked about by many
    files of the project (a training script calls every helper)."""
    if processing_here() and _beyond_the_prepass(text):
        raise NeedsWorker  # LibCST's parser may crash on it, which only a worker survives
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    return module, _calls(module, text, Spans(module, text))


def _beyond_the_prepass(text: str) -> bool:
    """Whether a caller's file, given to LibCST whole (not masked as a linted file is), may hold
    what crashes its native parser: a statement deeper than the pre-pass lets through
    (`prepass.deep_statements`), or a file CPython cannot parse (200 nested brackets and more)."""
    try:
        tree = prepass.parse(text, "<caller>")
    except (SyntaxError, ValueError, prepass.TooDeep):
        return True
    return bool(prepass.deep_statements(tree))


def _calls(module: cst.Module, text: str, spans: Spans) -> Dict[Tuple[int, int], List[Tuple[cst.CSTNode, ...]]]:
    """Every call by its `ast` position (line, UTF-8 column of its start), with its ancestors;
    calls that start together (`f(a)(b)`, `f(a).mean()`) outermost first (`_pick`)."""
    lines = text.splitlines()
    found: Dict[Tuple[int, int], List[Tuple[cst.CSTNode, ...]]] = {}

    class _Walk(Visitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack: List[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            self.stack.append(node)
            if isinstance(node, cst.Call):
                span = spans.get(node)
                if span is not None:
                    line = lines[span.start.line - 1] if span.start.line <= len(lines) else ""
                    col = len(line[: span.start.column].encode("utf-8"))
                    found.setdefault((span.start.line, col), []).append(tuple(self.stack))
            return True

        def on_leave(self, node: cst.CSTNode) -> None:
            self.stack.pop()

    _Walk().walk(module)
    return found


def note_evidence(ctx: "FileContext", node: cst.CSTNode, note: str) -> None:
    """Record that `node` (a parameter read) is what it is because of a caller, in words that
    name the caller: a finding reported at a node that holds it says so (`evidence_notes`)."""
    notes: Dict[int, Tuple[cst.CSTNode, str]] = ctx.per_file("caller-notes", lambda c: {})
    notes[id(node)] = (node, note)


def carry_evidence(ctx: "FileContext", source: cst.CSTNode, node: cst.CSTNode) -> None:
    """`node` (an expression a rule asked about) holds `source` (a parameter read it was followed
    to, through local names): its caller note too."""
    notes: Dict[int, Tuple[cst.CSTNode, str]] = ctx.per_file("caller-notes", lambda c: {})
    held = notes.get(id(source))
    if held is not None and held[0] is source:
        notes[id(node)] = (node, held[1])


def evidence_notes(ctx: "FileContext", node: cst.CSTNode) -> str:
    """The caller notes (`note_evidence`) of the nodes inside `node`, as a clause for a message:
    one place for every rule whose matcher judged a parameter at its callers."""
    notes: Dict[int, Tuple[cst.CSTNode, str]] = ctx.per_file("caller-notes", lambda c: {})
    if not notes:
        return ""
    found: List[str] = []
    stack: List[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        held = notes.get(id(current))
        if held is not None and held[0] is current and held[1] not in found:
            found.append(held[1])
        stack.extend(current.children)
    return "".join(f" ({one})" for one in found)
