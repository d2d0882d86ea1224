"""What a project's helpers produce: per-file summaries for `rules/producers.py`.

A rule sees `torch.log(self.probs(x))` or `kl_div(log_q, heads.target(x))` at a use site; whether
that call gives a softmax depends on code elsewhere: a function of the same file, a method of the
enclosing class or its bases, an `nn.Softmax` held in `self.softmax`, the last layer of an
`nn.Sequential`, or any of these in another module of the project. This module records those
facts, one cheap pass with the stdlib `ast` module per file (no libcst: it runs over every project
file in the index pre-pass), and answers questions about them.

A summary (`FileSummary`) is plain, picklable data: the facts of one file as written, with names
left unresolved. Resolution happens when asked (`Summaries.callee_kind`), across the files known,
so a file's summary never changes when another file does.

The facts, as tuples:

- a result (what a `return` gives): `("kind", kind, dim)`, a value of that kind (also a softmax
  written out: `e / e.sum(d, keepdim=True)` of an exp, `log_softmax(x).exp()`); `("call",
  callee)`, what calling `callee` gives; `("tuple", results)`, a tuple written out (`return
  recon, mu, logvar`); `("elt", callee, i)`, element `i` of what calling `callee` gives
  (`return self.both(x)[1]`); None, anything else. A local is followed when every binding is a
  plain assignment and all of them agree (`p = p.float()` keeps p's values), and not when it is
  changed in place (`p[mask] = 0`, `p.mul_(w)`; `e.div_(e.sum(d, keepdim=True))` of an exp is a
  softmax built in place).
- a callee (what a call calls): `("act", kind, dim)`, an activation module (`nn.Softmax(dim=-1)`,
  an `nn.Sequential` whose last layer is one, a bare function such as `torch.sigmoid` held in a
  name, or `functools.partial(F.softmax, dim=-1)`; `nn.Sequential(*layers)` of a list `__init__`
  builds at its top level, ending in one); `("new", dotted)`, an instance of the class `dotted` names (calling it runs its
  `forward`); `("name", dotted)`, a function or module-level value named in the file (or imported:
  `heads.probs`); `("self", name)`, a method or attribute of the instance.

Kinds are `"softmax"`, `"log_softmax"`, `"sigmoid"`, `"logsigmoid"` and `"norm"`; `dim` is the
softmax dimension when it is written as an integer literal, else None.

Call sites, for `rules/callers.py`: `FileSummary.calls` holds every call in the file that may
call a project function or method with arguments, as `(form, owner, member, line, col)`:
`("name", "helpers.f", "", ...)` a function called by an imported name (`f(x)`, `helpers.f(x)`);
`("new", "MyLoss", "forward", ...)` a method of an instance of a class the file names
(`crit = MyLoss(); crit(a, b)` calls `forward`, `obj.step(x)` calls `step`); `("attr",
"Trainer.criterion", "forward", ...)` an attribute or method of `self` in a method of `Trainer`
(`self.criterion(a, b)`, `self.helper(x)`); `("name", "my_kl", "", ...)` also for
`self.loss_fn(p, q)` where `__init__` keeps an imported function there (`self.loss_fn = my_kl`,
`functools.partial(my_kl, T=2)`). `line` and `col` are `ast`'s (col in UTF-8 bytes).
`Summaries.callers` resolves them, across files, to the function they call. `FileSummary.passes`
names, for the pre-filter, the functions some call passes an argument that shows a softmax or a
sigmoid (`passed_kinds`).

Conservative by construction: a name bound twice at module level (`net = net.to(device)` is
not a second binding), a function that may fall off
its end, yields, or carries a decorator that may change what it returns, an attribute assigned
anywhere but once at the top of `__init__` (or a class that sets attributes dynamically), a
conditional value (`nn.Softmax(-1) if c else nn.Identity()`), or a module path that matches two
project files: no fact, so the answer is None.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import posixpath
import re
import sys
from typing import AbstractSet, Callable, Dict, FrozenSet, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

from torchnumlint import ast_nodes
from torchnumlint.ast_nodes import child_nodes
from torchnumlint.rules import vocabulary

Kind = Tuple[str, Optional[int]]  # (kind, dim)
Target = Tuple[str, str]  # (anchor, dotted): anchor "" is an absolute import, else the folder a relative one starts at

FUNCTIONS: Dict[str, str] = {
    "torch.softmax": "softmax",
    "torch.nn.functional.softmax": "softmax",
    "torch.special.softmax": "softmax",
    "torch.log_softmax": "log_softmax",
    "torch.nn.functional.log_softmax": "log_softmax",
    "torch.special.log_softmax": "log_softmax",
    "torch.sigmoid": "sigmoid",
    "torch.nn.functional.sigmoid": "sigmoid",
    "torch.special.expit": "sigmoid",
    "torch.nn.functional.logsigmoid": "logsigmoid",
    "torch.norm": "norm",
    "torch.linalg.norm": "norm",
    "torch.linalg.vector_norm": "norm",
}
METHODS: Dict[str, str] = {"softmax": "softmax", "log_softmax": "log_softmax", "sigmoid": "sigmoid", "norm": "norm"}
ACTIVATIONS: Dict[str, str] = {
    f"{prefix}.{cls}": kind
    for prefix in ("torch.nn", "torch.nn.modules", "torch.nn.modules.activation")
    for cls, kind in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Sigmoid", "sigmoid"), ("LogSigmoid", "logsigmoid"))
}
SEQUENTIAL = frozenset({"torch.nn.Sequential", "torch.nn.modules.Sequential", "torch.nn.modules.container.Sequential"})
# Decorators that return what the function returns (anything else may change it).
TRANSPARENT_DECORATORS = frozenset(
    {
        "staticmethod",
        "classmethod",
        "torch.no_grad",
        "torch.enable_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.jit.script",
        "torch.jit.ignore",
        "torch.jit.unused",
        "torch.compile",
        "functools.lru_cache",
        "functools.cache",
        "torch.amp.custom_fwd",
        "torch.cuda.amp.custom_fwd",
    }
)
_DYNAMIC = frozenset({"setattr", "add_module", "register_module"})  # any attribute may change
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "__setitem__", "__delitem__"})  # a container's last layer may
_DEPTH = 8


class ClassSummary(NamedTuple):
    bases: Tuple[str, ...]  # dotted names as written
    methods: Dict[str, Optional[tuple]]  # name -> the results of its returns (None: unknown)
    attrs: Dict[str, Optional[tuple]]  # self.attr -> the callee it holds (None: unknown)


CallFact = Tuple[str, str, str, int, int]  # (form, owner, member, line, col): see the module's docstring


class FileSummary(NamedTuple):
    ambiguous: FrozenSet[str]  # names bound more than once at module level
    functions: Dict[str, Optional[tuple]]
    classes: Dict[str, ClassSummary]
    values: Dict[str, tuple]  # module-level `name = value` (bound once) -> the callee it holds
    imports: Dict[str, Target]
    calls: Tuple[CallFact, ...] = ()
    # A file with call sites is read whole where a rule judges its calls (`rules/callers.py`):
    # the digest of its code around them is one of its facts (`callers_digest`), so an edit
    # there re-lints the callees; a comment does not.
    callers_digest: str = ""
    # Functions (`f`) and methods (`Cls.m`) that run without autograd: decorated with
    # `@torch.no_grad()` / `@torch.inference_mode()`, or whose whole body is one such `with`
    # block. What they return carries no gradient (`Summaries.callee_no_grad`).
    no_grad: FrozenSet[str] = frozenset()
    # (name called, kind) for each call whose argument shows a kind (`passed_kinds`): a function
    # of that name may take the kind from this file's call, so its file keeps the rules that ask
    # (`Summaries.mentions_producer`, the pre-filter); a fact, so the fingerprint follows it.
    passes: FrozenSet[Tuple[str, str]] = frozenset()


def callers_digest(text: str, tree: ast.Module, calls: Tuple[CallFact, ...]) -> str:
    """A digest of what a rule may read where it judges the calls of this file: the source lines
    of the top-level statements that hold a call site (decorators included) and of the
    module-level code (imports, values). Lines, not `ast.dump`: as exact for what changes a
    judgement, at a fraction of the cost (this runs for most files of the index pass); a comment
    outside those statements changes nothing."""
    lines = text.splitlines()
    called = sorted({fact[-2] for fact in calls})
    parts: List[str] = []
    for stmt in tree.body:
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            at = bisect.bisect_left(called, first)
            if at == len(called) or called[at] > last:
                continue
            first = min([first] + [d.lineno for d in stmt.decorator_list])
        parts.extend(lines[first - 1 : last])
    return hashlib.blake2b("\n".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def could_matter(text: str) -> bool:
    """Whether a file can state a fact: produce a kind (a softmax, a sigmoid: it imports torch),
    or call another file's helper with arguments (it imports that file, and calls). A file that
    imports nothing cannot: its own calls are read where it is linted."""
    return "import" in text and "(" in text


@functools.lru_cache(maxsize=65536)
def module_stem(path: str) -> Tuple[str, bool]:
    """The path without `.py`, "/"-separated (`pkg/__init__.py` is `pkg`), and whether it is a
    package's `__init__` (its relative imports start at its own folder)."""
    stem = posixpath.normpath(path.replace("\\", "/"))
    if stem.endswith(".py"):
        stem = stem[:-3]
    package = stem == "__init__" or stem.endswith("/__init__")
    if package:
        stem = posixpath.dirname(stem) or "."
    return stem, package


_WORD = re.compile(r"\w+")


def words(text: str) -> FrozenSet[str]:
    """The words of `text`: the names it may call a producer by (`Summaries.mentions_producer`).
    The last text's are kept: the pre-filter asks this of one text once per rule that reads
    producers (a file's, then each group's), and the scan costs more than the rest of the test."""
    global _last_words
    last, found = _last_words
    if last is not text:
        found = frozenset(_WORD.findall(text))
        _last_words = (text, found)
    return found


_last_words: Tuple[str, FrozenSet[str]] = ("", frozenset())


def producer_questions(path: str, summary: Optional[FileSummary]) -> Iterator[Tuple[str, tuple]]:
    """(name, what to ask of it) for every callable of a file that may produce a kind: its
    functions, module values, classes (their `forward`) and class members."""
    if summary is None:
        return
    for name, results in summary.functions.items():
        yield name, ("function", path, name, results)
    for name, callee in summary.values.items():
        yield name, ("value", path, name, callee)
    for cls_name, info in summary.classes.items():
        yield cls_name, ("class", path, cls_name, None)
        for member in (*info.methods, *info.attrs):
            yield member, ("member", path, member, cls_name)


def summarize(path: str, tree: ast.Module, calls: bool = True) -> FileSummary:
    """The facts of one parsed file; its call sites only with `calls` (the project's index needs
    them, a file's own kinds do not)."""
    stem, package = module_stem(path)
    ambiguous = _ambiguous(_module_bindings(tree.body))
    imports = _import_table(tree.body, stem, package, ambiguous)
    module = _Exprs(imports)
    functions: Dict[str, Optional[tuple]] = {}
    classes: Dict[str, ClassSummary] = {}
    values: Dict[str, tuple] = {}
    scans: List[Tuple[_Scan, Optional[str]]] = []  # every function's and method's, for its calls
    handed: Dict[str, Dict[str, str]] = {}  # class -> self.attr -> the function it holds
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scan = _Scan(stmt, plain_stores=False)
            scans.append((scan, None))
            if stmt.name not in ambiguous:
                functions[stmt.name] = _returns(stmt, imports, scan)
        elif isinstance(stmt, ast.ClassDef):
            info = _class(stmt, imports, scans, handed)
            if stmt.name not in ambiguous:
                classes[stmt.name] = info
        elif (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and not _rebinds_itself(stmt)
        ):
            name = stmt.targets[0].id
            callee = module.instance(stmt.value) if name not in ambiguous else None
            if callee is not None:
                values[name] = callee
    facts = _CallFacts(imports, values, ambiguous, handed)
    if calls:
        for scan, cls in scans:
            facts.of_function(scan, cls)
        facts.of_module(tree.body)
    no_grad = frozenset(_no_grad_functions(tree.body, module))
    return FileSummary(ambiguous, functions, classes, values, imports, tuple(facts.facts), no_grad=no_grad, passes=frozenset(facts.passes))


def instance_callee(summary: FileSummary, expr: ast.AST) -> Optional[tuple]:
    """The callee fact of the object `expr` evaluates to, its names read in the summarised file:
    for a use site that binds a local to `nn.Sigmoid()` or `Net().to(device)`."""
    return _Exprs(summary.imports).instance(expr)


NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad"})


def _no_grad_functions(body: List[ast.stmt], exprs: "_Exprs") -> Iterator[str]:
    """The module-level functions (`f`) and methods of module-level classes (`Cls.m`) of `body`
    that run without autograd (see `FileSummary.no_grad`)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and _runs_without_grad(stmt, exprs):
            yield stmt.name
        elif isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and _runs_without_grad(member, exprs):
                    yield f"{stmt.name}.{member.name}"


def _runs_without_grad(func: Union[ast.FunctionDef, ast.AsyncFunctionDef], exprs: "_Exprs") -> bool:
    """Decorated with `torch.no_grad` / `inference_mode` (called or not), or a body that is one
    `with torch.no_grad():` block after an optional docstring."""

    def disables(expr: ast.AST) -> bool:
        call = expr.func if isinstance(expr, ast.Call) else expr
        if exprs.qualname(call) not in NO_GRAD:
            return False
        # `inference_mode(False)` re-enables autograd
        return not (isinstance(expr, ast.Call) and expr.args and isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False)

    if any(disables(deco) for deco in func.decorator_list):
        return True
    body = func.body[1:] if func.body and isinstance(func.body[0], ast.Expr) and isinstance(func.body[0].value, ast.Constant) else func.body
    return len(body) == 1 and isinstance(body[0], ast.With) and any(disables(item.context_expr) for item in body[0].items)


# ---------------------------------------------------------------------------------------------
# Building: module-level names, imports, expressions


def _module_bindings(body: List[ast.stmt]) -> Iterator[Tuple[str, Optional[str]]]:
    """(name, what it imports) for every name a module-level statement binds (also inside
    `if`/`try`/`for`/`with`), once per binding; `what` is None for anything but an import."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt.name, None
            continue
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                yield alias.asname or alias.name.split(".")[0], alias.name if alias.asname else alias.name.split(".")[0]
            continue
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name != "*":
                    yield alias.asname or alias.name, f"{'.' * stmt.level}{stmt.module or ''}.{alias.name}"
            continue
        targets: List[ast.AST] = []
        if isinstance(stmt, ast.Assign) and _rebinds_itself(stmt):
            continue  # `net = net.to(device)`: the same module, not another binding
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
        for target in targets:
            yield from ((n.id, None) for n in ast_nodes.walk(target) if isinstance(n, ast.Name))
        for field in ("body", "orelse", "finalbody"):
            yield from _module_bindings(getattr(stmt, field, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            if handler.name:
                yield handler.name, None
            yield from _module_bindings(handler.body)


def _ambiguous(bindings: Iterator[Tuple[str, Optional[str]]]) -> FrozenSet[str]:
    """The names bound more than once; importing the same thing twice (`import torch`,
    `import torch.nn`) is one binding."""
    seen: Dict[str, Optional[str]] = {}
    ambiguous: Set[str] = set()
    for name, imported in bindings:
        if name in seen and (imported is None or seen[name] != imported):
            ambiguous.add(name)
        seen[name] = imported
    return frozenset(ambiguous)


def _import_table(body: List[ast.stmt], stem: str, package: bool, ambiguous: FrozenSet[str]) -> Dict[str, Target]:
    """Module-level imports: local name -> (anchor, dotted). `import a.b` binds `a`; a relative
    import is anchored at the folder it starts from."""
    table: Dict[str, Target] = {}
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                table[alias.asname or alias.name.split(".")[0]] = ("", alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            anchor, module = "", stmt.module or ""
            if stmt.level:
                anchor = stem if package else (posixpath.dirname(stem) or ".")
                for _ in range(stmt.level - 1):
                    anchor = posixpath.normpath(posixpath.join(anchor, ".."))
            for alias in stmt.names:
                if alias.name != "*":
                    table[alias.asname or alias.name] = (anchor, f"{module}.{alias.name}" if module else alias.name)
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
            stack.extend(stmt.body + getattr(stmt, "orelse", []) + getattr(stmt, "finalbody", []))
            stack.extend(s for h in getattr(stmt, "handlers", []) for s in h.body)
    return {name: target for name, target in table.items() if name not in ambiguous}


def _dotted(expr: ast.AST) -> Optional[str]:
    parts: List[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))


def _int(expr: Optional[ast.AST]) -> Optional[int]:
    sign = 1
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        sign, expr = -1, expr.operand
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return sign * expr.value
    return None


def _dim(call: ast.Call, position: int) -> Optional[int]:
    """The integer `dim` of a softmax-like call: a keyword, or the argument at `position`."""
    for keyword in call.keywords:
        if keyword.arg == "dim":
            return _int(keyword.value)
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    return _int(positional[position]) if len(positional) > position and len(positional) == len(call.args) else None


EXPS = frozenset({"torch.exp", "torch.special.exp"})
EXP_OF = {"log_softmax": "softmax", "logsigmoid": "sigmoid"}  # exp(log_softmax(x)) is softmax(x)


def _keeps(value: ast.AST, name: str) -> bool:
    """`name.float()`, `name.to(device)`: a rebinding of `name` to its own values (or module)."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and (value.func.attr in vocabulary.SAME_VALUES or value.func.attr in vocabulary.MODULE_METHODS)
    ):
        value = value.func.value
    return isinstance(value, ast.Name) and value.id == name


def _rebinds_itself(stmt: ast.Assign) -> bool:
    """`net = net.to(device)`, `p = p.float()`: one name rebound to its own values."""
    return len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and _keeps(stmt.value, stmt.targets[0].id)


def _normaliser(call: ast.AST, name: Optional[str]) -> Optional[Tuple[Optional[int]]]:
    """`(d,)` for `x.sum(d, keepdim=True)` (of the local `name`, when given): a softmax's
    denominator over `d` (None where `d` is not an integer literal); None for anything else."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "sum"):
        return None
    if name is not None and not (isinstance(call.func.value, ast.Name) and call.func.value.id == name):
        return None
    keywords = {k.arg: k.value for k in call.keywords}
    keepdim = keywords.get("keepdim", call.args[1] if len(call.args) > 1 else None)
    if not (isinstance(keepdim, ast.Constant) and keepdim.value is True):
        return None
    dim = keywords.get("dim", call.args[0] if call.args else None)
    return (_int(dim),) if dim is not None else None


class _Exprs:
    """Facts of expressions in one scope: `locals_` are the scope's names, `values` the values of
    those bound only by plain assignments (followed: all of them must agree), `changed` the
    in-place changes of locals; the rest are module-level or imported names."""

    def __init__(
        self,
        imports: Dict[str, Target],
        locals_: AbstractSet[str] = frozenset(),
        values: Optional[Dict[str, List[ast.AST]]] = None,
        changed: Optional[Dict[str, List[Optional[ast.Call]]]] = None,
        lists: Optional[Dict[str, ast.AST]] = None,
    ) -> None:
        self.imports = imports
        self.locals = locals_
        self.values = values or {}
        self.changed = changed or {}
        self.lists = lists or {}  # a list of layers -> its last element (`_last_layers`)

    def values_of(self, name: str) -> List[ast.AST]:
        """The values bound to the local `name`, less its value-keeping rebindings (`p = p.float()`,
        `net = net.to(device)`); [] when it is not followed."""
        return [value for value in self.values.get(name, ()) if not _keeps(value, name)]

    def _name(self, name: str, depth: int) -> Optional[tuple]:
        """The one result of every value bound to `name`; an in-place change makes it unknown,
        but for `e.div_(e.sum(d, keepdim=True))` of an exp: a softmax built in place."""
        found = self.values_of(name)
        changes = self.changed.get(name, [])
        if not found or len(changes) > 1:
            return None
        if changes:
            change = changes[0]
            div = change is not None and isinstance(change.func, ast.Attribute) and change.func.attr == "div_" and len(change.args) == 1
            dim = _normaliser(change.args[0], name) if change is not None and div else None
            return ("kind", "softmax", dim[0]) if dim is not None and len(found) == 1 and self._is_exp(found[0], depth) else None
        results = {self.result(value, depth + 1) for value in found}
        return results.pop() if len(results) == 1 else None

    def _is_exp(self, expr: ast.AST, depth: int) -> bool:
        """`x.exp()` or `torch.exp(x)`, or a local bound only to one."""
        if isinstance(expr, ast.Name):
            found = self.values_of(expr.id)
            return len(found) == 1 and not self.changed.get(expr.id) and depth <= _DEPTH and self._is_exp(found[0], depth + 1)
        if not isinstance(expr, ast.Call):
            return False
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "exp" and self.qualname(expr.func) is None:
            return not expr.args
        return self.qualname(expr.func) in EXPS and len(expr.args) == 1

    def qualname(self, expr: ast.AST) -> Optional[str]:
        """The absolute dotted name through the imports (`F.softmax` -> torch.nn.functional.softmax)."""
        dotted = _dotted(expr)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.locals:
            return None
        target = self.imports.get(head)
        if target is None:
            return dotted if head == "torch" else None  # `torch` used without an import: still torch
        anchor, qual = target
        if anchor:  # a relative import: a project name
            return None
        return f"{qual}.{rest}" if rest else qual

    def result(self, expr: Optional[ast.AST], depth: int = 0) -> Optional[tuple]:
        """What `expr` gives (see the module's docstring), also `("tuple", results)` for a tuple
        (`return recon, mu, logvar`) and `("elt", callee, i)` for an element of a call's
        (`return self.head(x)[1]`)."""
        if depth > _DEPTH or expr is None:
            return None
        if isinstance(expr, ast.Name):
            return self._name(expr.id, depth)
        if isinstance(expr, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in expr.elts):
            return ("tuple", tuple(self.result(e, depth + 1) for e in expr.elts))
        if isinstance(expr, ast.Subscript):
            return self._element(self.result(expr.value, depth + 1), _int(expr.slice))
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
            return self._ratio(expr, depth)
        if not isinstance(expr, ast.Call):
            return None
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in vocabulary.SAME_VALUES and self.qualname(func) is None:
            return self.result(func.value, depth + 1)  # `return p.unsqueeze(1).float()`: the same values
        exp_of = (
            func.value
            if isinstance(func, ast.Attribute) and func.attr == "exp" and self.qualname(func) is None and not expr.args
            else (expr.args[0] if self.qualname(func) in EXPS and len(expr.args) == 1 else None)
        )
        if exp_of is not None:  # `F.log_softmax(x, -1).exp()` is a softmax, `logsigmoid(x).exp()` a sigmoid
            inner = self.result(exp_of, depth + 1)
            return ("kind", EXP_OF[inner[1]], inner[2]) if inner is not None and inner[0] == "kind" and inner[1] in EXP_OF else None
        kind = FUNCTIONS.get(self.qualname(expr.func) or "")
        if kind is not None:
            return ("kind", kind, _dim(expr, 1) if "softmax" in kind else None)
        func = expr.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in METHODS
            and self.qualname(func.value) is None
            and not (isinstance(func.value, ast.Name) and func.value.id == "self")
        ):
            kind = METHODS[func.attr]
            return ("kind", kind, _dim(expr, 0) if "softmax" in kind else None)
        callee = self.callee(func, depth + 1)
        return ("call", callee) if callee is not None else None

    @staticmethod
    def _element(whole: Optional[tuple], index: Optional[int]) -> Optional[tuple]:
        """Element `index` of what `whole` gives: of a tuple written out, or of a call's result."""
        if whole is None or index is None:
            return None
        if whole[0] == "tuple":
            return whole[1][index] if -len(whole[1]) <= index < len(whole[1]) else None
        return ("elt", whole[1], index) if whole[0] == "call" else None

    def _ratio(self, expr: ast.BinOp, depth: int) -> Optional[tuple]:
        """`e / e.sum(d, keepdim=True)` of an exp `e` (`x.exp() / x.exp().sum(-1, keepdim=True)`):
        a softmax over `d`, written out."""
        right = expr.right
        if not (isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute) and self._is_exp(expr.left, depth)):
            return None
        dim = _normaliser(right, None)
        return ("kind", "softmax", dim[0]) if dim is not None and ast.dump(right.func.value) == ast.dump(expr.left) else None

    def callee(self, func: ast.AST, depth: int = 0) -> Optional[tuple]:
        """What calling `func` means: an instance called right away, a local holding one, `self.x`,
        or a module-level / imported name; `m.forward` is calling `m`."""
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "forward"
            and not (isinstance(func.value, ast.Name) and func.value.id == "self")  # a method of the class
            and depth <= _DEPTH
        ):
            return self.callee(func.value, depth + 1)
        if isinstance(func, ast.Call):
            return self.instance(func)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            return ("self", func.attr) if "self" in self.locals else None
        dotted = _dotted(func)
        if dotted is None:
            return None
        head = dotted.partition(".")[0]
        if head in self.locals:
            found = self.values_of(head)
            return self.instance(found[0]) if len(found) == 1 and head == dotted and depth <= _DEPTH else None
        return ("name", dotted)

    def instance(self, value: ast.AST) -> Optional[tuple]:
        """What calling the object `value` evaluates to gives: an activation module or function
        (`nn.Sigmoid()`, `torch.sigmoid`), an `nn.Sequential` ending in one, a project class's
        instance. None for anything else (a conditional, another torch module, a local)."""
        kind = FUNCTIONS.get(self.qualname(value) or "")
        if kind is not None:
            return ("act", kind, None)  # `self.act = torch.sigmoid`: its dim is the call's
        if not isinstance(value, ast.Call):
            return None
        if self.qualname(value.func) == "functools.partial" and len(value.args) == 1:
            kind = FUNCTIONS.get(self.qualname(value.args[0]) or "")  # `partial(F.softmax, dim=-1)`
            return ("act", kind, _dim(value, len(value.args) + 1) if "softmax" in kind else None) if kind is not None else None
        while (
            isinstance(value.func, ast.Attribute)
            and value.func.attr in vocabulary.MODULE_METHODS
            and isinstance(value.func.value, ast.Call)
        ):
            value = value.func.value
        qual = self.qualname(value.func)
        if qual in ACTIVATIONS:
            kind = ACTIVATIONS[qual]
            return ("act", kind, _dim(value, 0) if "softmax" in kind else None)
        if qual in SEQUENTIAL:
            if len(value.args) == 1 and isinstance(value.args[0], ast.Starred) and isinstance(value.args[0].value, ast.Name):
                last = self.lists.get(value.args[0].value.id)  # `nn.Sequential(*layers)`
                return self.instance(last) if isinstance(last, ast.Call) and self.qualname(last.func) in ACTIVATIONS else None
            if value.keywords or not value.args or any(isinstance(a, ast.Starred) for a in value.args):
                return None
            last = value.args[-1]
            if isinstance(last, ast.Call) and self.qualname(last.func) in ACTIVATIONS:
                return self.instance(last)
            return None
        if (qual or "").startswith("torch."):
            return None
        dotted = _dotted(value.func)
        if dotted is None or dotted.partition(".")[0] in self.locals:
            return None
        return ("new", dotted)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# The node types `_Scan._local` reads (CPython's parser makes no subclass of them): the scan
# skips the call for every other node, most of a function's.
_LOCAL_FACTS = frozenset(
    {
        ast.Return,
        ast.Yield,
        ast.YieldFrom,
        ast.Name,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Import,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
    }
)


class _Scan:
    """One walk over a function: its own returns, whether it yields, how many times it binds each
    local name and the value of a plain `name = value`; and, nested functions included, what it
    stores in `self.attr` (the value where `plain`: a single-target assignment at the top of the
    body), whether it sets attributes dynamically."""

    def __init__(self, func: Union[ast.FunctionDef, ast.AsyncFunctionDef], plain_stores: bool) -> None:
        self.returns: List[ast.Return] = []
        self.generator = False
        self.binds: Dict[str, int] = {}
        self.plain: Dict[str, ast.AST] = {}
        self.self_stores: List[Tuple[str, Optional[ast.AST]]] = []
        self.dynamic = False
        self.calls: List[ast.Call] = []  # nested functions' too
        self.assigned: Dict[str, List[ast.AST]] = {}  # every plain `name = value` of a local, in order
        self.changed: Dict[str, List[Optional[ast.Call]]] = {}  # in-place: `p.div_(s)`; None for `p[i] = v`
        top = set(map(id, func.body)) if plain_stores else set()
        stack = [(child, False) for child in child_nodes(func)]
        while stack:
            node, nested = stack.pop()
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self._store(node, id(node) in top)
            elif isinstance(node, ast.Call):
                self.calls.append(node)
                if (
                    not nested
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.attr.endswith("_")
                    and not node.func.attr.startswith("_")
                ):
                    self.changed.setdefault(node.func.value.id, []).append(node)
                called = (_dotted(node.func) or "").split(".")
                self.dynamic = self.dynamic or called[-1] in _DYNAMIC
                if len(called) == 3 and called[0] == "self" and called[2] in _MUTATORS:
                    self.self_stores.append((called[1], None))  # `self.net.append(...)`
            if not nested and type(node) in _LOCAL_FACTS:
                self._local(node)
            inner = nested or isinstance(node, _SCOPES)
            stack.extend([(child, inner) for child in child_nodes(node)])

    def _local(self, node: ast.AST) -> None:
        if isinstance(node, ast.Return):
            self.returns.append(node)
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            self.generator = True
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            self.binds[node.id] = self.binds.get(node.id, 0) + 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.binds[node.name] = self.binds.get(node.name, 0) + 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.binds.update((a.asname or a.name.split(".")[0], 2) for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.binds.update((name, 2) for name in node.names)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.plain[node.targets[0].id] = node.value
            self.assigned.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            self.plain[node.target.id] = node.value
            self.assigned.setdefault(node.target.id, []).append(node.value)
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    self.changed.setdefault(target.value.id, []).append(None)  # `p[mask] = 0`

    def _store(self, node: Union[ast.Assign, ast.AugAssign, ast.AnnAssign], top: bool) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        plain = top and len(targets) == 1 and not isinstance(node, ast.AugAssign)
        for target in targets:
            for part in ast_nodes.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self":
                    self.self_stores.append((part.attr, node.value if plain and part is target else None))


def _always_returns(body: List[ast.stmt]) -> bool:
    """Every way through `body` ends in a `return` or `raise` (no implicit `return None`)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _always_returns(last.body)
    return False


def _returns(func: Union[ast.FunctionDef, ast.AsyncFunctionDef], imports: Dict[str, Target], scan: _Scan) -> Optional[tuple]:
    """The results of a function's returns, or None when its value cannot be told from them."""
    if isinstance(func, ast.AsyncFunctionDef) or scan.generator or not _always_returns(func.body):
        return None
    exprs = _Exprs(imports)
    for deco in func.decorator_list:
        name = exprs.qualname(deco.func if isinstance(deco, ast.Call) else deco) or _dotted(deco)
        if name not in TRANSPARENT_DECORATORS:
            return None
    params = {a.arg for a in ast_nodes.walk(func.args) if isinstance(a, ast.arg)}
    values = {
        name: found
        for name, found in scan.assigned.items()
        if len(found) == scan.binds.get(name) and name not in params  # every binding a plain one
    }
    exprs = _Exprs(imports, params | set(scan.binds), values, scan.changed)
    return tuple(exprs.result(r.value) for r in scan.returns)


def _class(
    node: ast.ClassDef, imports: Dict[str, Target], scans: List[Tuple[_Scan, Optional[str]]], handed: Dict[str, Dict[str, str]]
) -> ClassSummary:
    """The class's facts; the scan of each of its methods is added to `scans`, and the functions
    its attributes are bound to once (`self.loss_fn = my_kl`, `functools.partial(my_kl, T=2)`)
    to `handed[class name]`."""
    bases = tuple(d for d in map(_dotted, node.bases) if d is not None)
    methods: Dict[str, Optional[tuple]] = {}
    stores: Dict[str, List[Optional[ast.AST]]] = {}  # self.attr -> values, None where not usable
    dynamic = False
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scan = _Scan(stmt, plain_stores=stmt.name == "__init__")
            scans.append((scan, node.name))
            methods[stmt.name] = _returns(stmt, imports, scan) if stmt.name not in methods else None
            dynamic = dynamic or scan.dynamic
            for attr, value in scan.self_stores:
                stores.setdefault(attr, []).append(value)
        else:
            for name, _ in _module_bindings([stmt]):  # a class attribute: its value is not followed
                stores.setdefault(name, []).extend([None, None])
    init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    exprs = _Exprs(imports, lists=_last_layers(init.body) if init is not None else {})
    attrs = {
        attr: exprs.instance(found[0]) if len(found) == 1 and found[0] is not None and not dynamic else None
        for attr, found in stores.items()
    }
    handed[node.name] = {
        attr: name
        for attr, found in stores.items()
        if len(found) == 1 and found[0] is not None and not dynamic
        for name in (_handed_function(exprs, found[0]),)
        if name is not None
    }
    return ClassSummary(bases, methods, attrs)


def _handed_function(exprs: "_Exprs", value: ast.AST) -> Optional[str]:
    """The dotted name of the function `value` hands on: `my_kl`, `losses.my_kl`, or
    `functools.partial(my_kl, T=2)` with keywords only (the later call's positions are its own)."""
    if isinstance(value, ast.Call) and exprs.qualname(value.func) == "functools.partial":
        if len(value.args) != 1 or any(k.arg is None for k in value.keywords):
            return None
        value = value.args[0]
    return _dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else None


def _last_layers(body: List[ast.stmt]) -> Dict[str, ast.AST]:
    """The last element of each list a function body builds at its top level, in order (`layers
    = [...]`, `layers.append(x)`, `layers += [...]`, `layers.extend([...])`), for `nn.Sequential(
    *layers)`; a list changed any other way, or inside a branch or loop after its last known
    element, is left out."""
    last: Dict[str, Optional[ast.AST]] = {}
    for stmt in body:
        known = _list_step(stmt)
        if known is not None:
            last[known[0]] = known[1]
            continue
        for node in ast_nodes.walk(stmt):  # any other change of a list: its last element is unknown
            target = (
                node.func.value
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                else (node.target if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else None)
            )
            names = [target] if target is not None else list(node.targets) if isinstance(node, ast.Assign) else []
            for name in names:
                base = name.value if isinstance(name, ast.Subscript) else name
                if isinstance(base, ast.Name) and base.id in last:
                    last[base.id] = None
    return {name: value for name, value in last.items() if value is not None}


def _list_step(stmt: ast.stmt) -> Optional[Tuple[str, Optional[ast.AST]]]:
    """(name, its new last element) for a statement that builds a list in a known way."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.List)
    ):
        return stmt.targets[0].id, stmt.value.elts[-1] if stmt.value.elts else None
    if (
        isinstance(stmt, ast.AugAssign)
        and isinstance(stmt.op, ast.Add)
        and isinstance(stmt.target, ast.Name)
        and isinstance(stmt.value, ast.List)
        and stmt.value.elts
    ):
        return stmt.target.id, stmt.value.elts[-1]
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and len(call.args) == 1
        and not call.keywords
    ):
        if call.func.attr == "append":
            return call.func.value.id, call.args[0]
        if call.func.attr == "extend" and isinstance(call.args[0], ast.List) and call.args[0].elts:
            return call.func.value.id, call.args[0].elts[-1]
    return None


# ---------------------------------------------------------------------------------------------
# Call sites

_STDLIB = frozenset(sys.stdlib_module_names) | {"torch", "builtins"}  # never a project file


class _CallFacts:
    """The call sites of one file that may call project code with arguments (the module's
    docstring has the forms). An object is an instance of a project class when a name bound
    once (in the function, else at module level) holds `Cls(...)`, through `.to(device)` steps."""

    def __init__(
        self, imports: Dict[str, Target], values: Dict[str, tuple], ambiguous: FrozenSet[str], handed: Dict[str, Dict[str, str]]
    ) -> None:
        self.handed = handed
        self.exprs = _Exprs(imports)
        self.imports = imports
        self.module_instances = {name: callee[1] for name, callee in values.items() if callee[0] == "new"}
        self.ambiguous = ambiguous
        self.facts: List[CallFact] = []
        self.passes: Set[Tuple[str, str]] = set()

    def of_function(self, scan: _Scan, cls: Optional[str]) -> None:
        instances = {
            name: callee[1]
            for name, value in scan.plain.items()
            if scan.binds.get(name) == 1
            for callee in (self.exprs.instance(value),)
            if callee is not None and callee[0] == "new"
        }
        locals_ = set(scan.binds) - set(instances)
        for call in scan.calls:
            self._add(call, cls, instances, locals_, scan.plain)

    def of_module(self, body: List[ast.stmt]) -> None:
        for stmt in body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for node in ast_nodes.walk(stmt):
                    if isinstance(node, ast.Call):
                        self._add(node, None, {}, set())

    def _add(
        self, call: ast.Call, cls: Optional[str], instances: Dict[str, str], locals_: Set[str], plain: Optional[Dict[str, ast.AST]] = None
    ) -> None:
        if not (call.args or call.keywords):
            return
        func, member = call.func, "forward"
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value  # `m.forward(x)` is `m(x)`
        elif isinstance(func, ast.Attribute) and (
            isinstance(func.value, ast.Call)
            or (isinstance(func.value, ast.Name) and func.value.id in ("self", *instances))
            or (isinstance(func.value, ast.Name) and func.value.id in self.module_instances and func.value.id not in locals_)
        ):
            member = func.attr  # a method of an object
            func = func.value
        fact = self._fact(func, member, cls, instances, locals_)
        held = self.handed.get(cls, {}).get(member) if cls is not None and isinstance(func, ast.Name) and func.id == "self" else None
        if held is not None:  # `self.loss_fn(p, q)` calls the function `__init__` kept there, when another file's
            target = self.imports.get(held.partition(".")[0])
            fact = ("name", held, "") if target is not None and (target[0] or target[1].partition(".")[0] not in _STDLIB) else None
        if fact is not None:
            self.facts.append((*fact, call.lineno, call.col_offset))
            kinds = passed_kinds(call, plain or {})
            if kinds:
                # the names the callee may have: a method's (`forward` for a module called), a
                # class's, an attribute's, a function's (past an import alias)
                called = {fact[2], fact[1].rpartition(".")[2]} - {""} if fact[0] != "name" else {fact[1].rpartition(".")[2]}
                if fact[0] == "name":
                    target = self.imports.get(fact[1].partition(".")[0])
                    if target is not None:
                        called.add(target[1].rpartition(".")[2])
                self.passes.update((name, kind) for name in called for kind in kinds)

    def _fact(
        self, func: ast.AST, member: str, cls: Optional[str], instances: Dict[str, str], locals_: Set[str]
    ) -> Optional[Tuple[str, str, str]]:
        if isinstance(func, ast.Call):
            callee = self.exprs.instance(func)  # `MyLoss()(a, b)`, `Head(d).predict(x)`
            return ("new", callee[1], member) if callee is not None and callee[0] == "new" else None
        if isinstance(func, ast.Name):
            if func.id == "self":
                return ("attr", f"{cls}.{member}", "forward") if cls is not None and member != "forward" else None
            if func.id in instances:
                return "new", instances[func.id], member
            if func.id in self.module_instances and func.id not in locals_:
                return "new", self.module_instances[func.id], member
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            return ("attr", f"{cls}.{func.attr}", member) if cls is not None else None  # `self.criterion(a, b)`
        dotted = _dotted(func)
        if dotted is None or member != "forward":
            return None
        head = dotted.partition(".")[0]
        target = self.imports.get(head)
        if head in locals_ or target is None or (not target[0] and target[1].partition(".")[0] in _STDLIB):
            return None
        return "name", dotted, ""


_KIND_WORDS = (("softmax", "softmax"), ("sigmoid", "sigmoid"), ("expit", "sigmoid"))


def passed_kinds(call: ast.Call, plain: Dict[str, ast.AST]) -> FrozenSet[str]:
    """The kinds whose word an argument of `call` shows (`F.softmax(z)`, `z.sigmoid()`,
    `nn.Softmax(-1)(z)`, or a local name whose plain assignment does), and `=name` for each
    callable called in one (`probs(z)`: a project helper may return a kind): a cheap
    over-estimate of what a callee's parameter may be, for the pre-filter only (the rules judge
    the argument itself)."""
    found: Set[str] = set()
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        values = [arg, plain[arg.id]] if isinstance(arg, ast.Name) and arg.id in plain else [arg]
        for value in values:
            for node in ast_nodes.walk(value):
                word = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
                found.update(kind for part, kind in _KIND_WORDS if part in word.lower())
                if isinstance(node, ast.Call):
                    called = _dotted(node.func)
                    if called is not None:
                        found.add("=" + called.rpartition(".")[2])
    return frozenset(found)


# ---------------------------------------------------------------------------------------------
# Answering


Instance = Tuple[str, str]  # (path, class name): the class of `self`


def named_calls(files: Mapping[str, Optional[FileSummary]]) -> Dict[str, List[Tuple[str, CallFact]]]:
    """Every call fact of `files` by the names it may call (`call_names`), in the files' order."""
    table: Dict[str, List[Tuple[str, CallFact]]] = {}
    for where, summary in files.items():
        if summary is None:
            continue
        for fact in summary.calls:
            for name in call_names(summary, fact):
                table.setdefault(name, []).append((where, fact))
    return table


def call_names(summary: FileSummary, fact: CallFact) -> Set[str]:
    """The names a call fact of `summary`'s file may call (`Summaries.callers` looks calls up by
    them): a function's own name (past an import alias), a method's, and for `self.attr(...)`
    both `attr` (a method) and the member called on it (`forward` of the module it holds)."""
    form, owner, member = fact[:3]
    if form == "name":
        head, _, rest = owner.partition(".")
        anchor_qual = summary.imports.get(head)
        full = (anchor_qual[1] + ("." + rest if rest else "")) if anchor_qual else owner
        return {full.rpartition(".")[2]}
    return {member} | ({owner.rpartition(".")[2]} if form == "attr" else set())


class CallerSite(NamedTuple):
    """A call of a project function from another file: where, and whether it binds `self`
    (a method called on an instance) so that its first argument is the second parameter's."""

    path: str
    line: int
    col: int  # `ast`'s: UTF-8 bytes from the line's start
    bound: bool


def _passes(summary: Optional[FileSummary]) -> FrozenSet[Tuple[str, str]]:
    return summary.passes if summary is not None else frozenset()


class Summaries:
    """The summaries of a project's files, by path, and what their callables produce. Every file
    of the project has an entry, None for one that states no fact (it holds no call, or it does
    not parse): a module path that names two
    files is ambiguous even when only one of them has a summary."""

    def __init__(self, files: Optional[Dict[str, Optional[FileSummary]]] = None, buffers: Optional[Dict[str, str]] = None) -> None:
        self.files: Dict[str, Optional[FileSummary]] = dict(files or {})
        # The text of files as an editor or a test holds them, over what is on disk (never cached)
        self.buffers: Dict[str, str] = dict(buffers or {})
        self._stems: Optional[Dict[str, List[str]]] = None  # every suffix of every stem -> paths
        self._subclasses: Optional[Dict[str, List[Instance]]] = None  # a base's last name -> classes
        self._forget()

    def _forget(self) -> None:
        """Drop the answers derived from `files` (memoised: the producer names of a project ask
        the same resolutions and subclass questions hundreds of thousands of times)."""
        self._named: Optional[Dict[str, List[tuple]]] = None  # a name -> the callables so named
        self._passed: Dict[str, Set[str]] = {}  # a name called -> the kinds an argument of a call shows (`passes`)
        self._producers: Dict[Tuple[FrozenSet[str], str], bool] = {}  # (kinds, name) -> produces
        self._kinds_named: Dict[Tuple[FrozenSet[str], str], bool] = {}  # (kinds, name) -> `_named_kind`
        self._mentioned: Tuple[str, Set[str]] = ("", set())  # the last text asked of, its words `_among`
        self._resolved: Dict[Tuple[str, str, int], Optional[Tuple[str, str, str]]] = {}
        self._modules: Dict[Tuple[str, str], Optional[str]] = {}
        self._overrides: Dict[Tuple[Instance, str], bool] = {}
        self._calls: Optional[Mapping[str, List[Tuple[str, CallFact]]]] = None  # a callee's name -> sites
        self._callers: Dict[Tuple[str, Optional[str], str], List[CallerSite]] = {}

    def __getstate__(self):
        return {"files": self.files}

    def __setstate__(self, state: Dict[str, Dict[str, Optional[FileSummary]]]) -> None:
        Summaries.__init__(self, state["files"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Summaries) and self.files == other.files

    def absorb(self, other: "Summaries") -> None:
        self.files.update(other.files)
        self.buffers.update(other.buffers)
        self._stems = self._subclasses = None
        self._forget()

    def keep_answers(self, old: "Summaries") -> None:
        """Take over what `old` worked out from the names of its files' summaries: the producer
        questions, what each producer gives, the resolved names and modules, the subclasses and
        overrides. Only for an `old` with the same files whose summaries differ from these at most
        in their calls, callers digest, no_grad and passes (`project_tables.names_part`), none of
        which those answers read: an editor's buffer after a line moved or a call was typed (the
        language server, `server/facts.py`). The tables shared stay valid for both. What calls
        pass each name is gathered again unless no file's passes changed; the callers of a
        function are worked out again."""
        if old._named is not None:
            same = all(_passes(summary) == _passes(old.files.get(path)) for path, summary in self.files.items())
            self._named, self._passed = old._named, old._passed if same else self._gather_passed()
        self._stems, self._subclasses = old._stems, old._subclasses
        self._producers, self._resolved, self._modules, self._overrides = old._producers, old._resolved, old._modules, old._overrides
        self._kinds_named, self._mentioned = {}, ("", set())

    def with_file(self, path: str, summary: Optional[FileSummary]) -> "Summaries":
        return Summaries({**self.files, path: summary}, {p: t for p, t in self.buffers.items() if p != path})

    def without(self, path: str) -> "Summaries":
        return Summaries({p: s for p, s in self.files.items() if p != path}, {p: t for p, t in self.buffers.items() if p != path})

    # -- the questions -----------------------------------------------------------------------------
    def mentions_producer(self, text: str, kinds: FrozenSet[str]) -> bool:
        """Whether `text` names a project callable that produces one of `kinds` (a function, a
        class whose `forward` does, a method, an attribute or module value holding an activation),
        or a name some call of the project passes one to (`FileSummary.passes`: a parameter takes
        the kind its callers pass): a file that names none cannot call or be passed one. The
        pre-filter of rules that read producers.

        Only the names that occur in `text` are judged (each once per project and kinds): a
        pre-commit run asks this of one file, and judging every callable of a large project
        costs more than linting that file."""
        last, among = self._mentioned
        if last is not text:  # each rule that reads producers asks of the same text
            among = self._among(words(text))
            self._mentioned = (text, among)
        return any(self._named_kind(word, kinds) for word in among)

    def producer_names(self) -> Set[str]:
        """Every name a producer candidate of the project is known by (`producer_questions`), and every
        name some call of the project passes a kind to (`FileSummary.passes`)."""
        named, passed = self._names()
        return named.keys() | passed.keys()

    def _among(self, words: AbstractSet[str]) -> Set[str]:
        """Those of `words` that `producer_names` holds, without building that union: a file's
        words are few, a project's names many, and this is asked per file and rule."""
        named, passed = self._names()
        return (words & named.keys()) | (words & passed.keys())

    def producers_among(self, words: Iterable[str], kinds: FrozenSet[str]) -> FrozenSet[str]:
        """Those of `words` that name a producer of one of `kinds`, or a callable some call passes
        one to: what a cached result that asked `mentions_producer` depends on (`fact_reads.py`)."""
        return frozenset(word for word in self._among(set(words)) if self._named_kind(word, kinds))

    def _named_kind(self, word: str, kinds: FrozenSet[str]) -> bool:
        """Memoised: each rule that reads producers asks it of every project name in each text."""
        key = (kinds, word)
        known = self._kinds_named.get(key)
        if known is None:
            known = self._kinds_named[key] = self.may_be_passed(word, kinds) or self._produces(kinds, word)
        return known

    def may_be_passed(self, name: str, kinds: FrozenSet[str]) -> bool:
        """Whether some call in the project's files passes a function or method called `name` an
        argument that may be one of `kinds` (`FileSummary.passes`: the kind's word, or a call of
        a producer of it). Calls by a bare name of the same file are not recorded."""
        return any(kind in kinds or (kind[:1] == "=" and self._produces(kinds, kind[1:])) for kind in self._names()[1].get(name, ()))

    def _names(self) -> Tuple[Dict[str, List[tuple]], Dict[str, Set[str]]]:
        """(a name -> the producer questions of callables so named, a name called -> the kinds its
        calls' arguments show), built once."""
        if self._named is None:
            self._named = {}
            for path, summary in self.files.items():
                for name, question in producer_questions(path, summary):
                    self._named.setdefault(name, []).append(question)
            self._passed = self._gather_passed()
        return self._named, self._passed

    def _gather_passed(self) -> Dict[str, Set[str]]:
        """A name called -> the kinds the arguments of its calls show, over every file."""
        passed: Dict[str, Set[str]] = {}
        for summary in self.files.values():
            for name, kind in summary.passes if summary is not None else ():
                passed.setdefault(name, set()).add(kind)
        return passed

    def _produces(self, kinds: FrozenSet[str], word: str) -> bool:
        """Whether a project callable named `word` produces one of `kinds` (once per project)."""
        key = (kinds, word)
        if key not in self._producers:
            self._producers[key] = any(self._answers(question) & kinds for question in self._names()[0].get(word, ()))
        return self._producers[key]

    def _answers(self, question: tuple) -> FrozenSet[str]:
        """The kinds a producer candidate gives (see `producer_questions`): what it returns, and each
        element of a tuple its own returns write out (`return logits, probs`)."""
        what, path, name, fact = question
        if what == "function":
            results = fact
            ask = lambda element: self._returns_kind(path, None, fact, 0, element)  # noqa: E731
        elif what == "class":
            found = self._member((path, name), "forward", 0)
            results = found[2] if found is not None and found[0] == "method" else None
            ask = lambda element: self._forward_kind((path, name), 0, element)  # noqa: E731
        elif what == "value":
            return frozenset(kind[:1] if (kind := self.callee_kind(path, None, fact)) is not None else ())
        else:
            found = self._member((path, fact), name, 0)
            results = found[2] if found is not None and found[0] == "method" else None
            ask = lambda element: self._member_kind((path, fact), name, 0, element)  # noqa: E731
        width = max((len(r[1]) for r in results or () if r is not None and r[0] == "tuple"), default=0)
        return frozenset(k[0] for k in map(ask, (None, *range(width))) if k is not None)

    def callee_kind(
        self, path: str, instance: Optional[Instance], callee: Optional[tuple], depth: int = 0, element: Optional[int] = None
    ) -> Optional[Kind]:
        """The kind that calling `callee` (names resolved in the file at `path`; `self` an instance
        of `instance`) gives, or element `element` of the tuple it gives (`recon, mu, logvar =
        model(x)`); None when that is not known to be of one kind."""
        if callee is None or depth > _DEPTH:
            return None
        tag = callee[0]
        if tag == "act":
            return (callee[1], callee[2]) if element is None else None
        if tag == "self":
            return self._member_kind(instance, callee[1], depth + 1, element) if instance is not None else None
        found = self._resolve(path, callee[1], depth + 1)
        if found is None:
            return None
        what, where, name = found
        summary = self.files[where]
        assert summary is not None  # `_resolve` finds names only in files that were read
        if tag == "new":
            return self._forward_kind((where, name), depth + 1, element) if what == "class" else None
        if what == "function":
            return self._returns_kind(where, None, summary.functions[name], depth + 1, element)
        if what == "value":
            return self.callee_kind(where, None, summary.values[name], depth + 1, element)
        return None  # calling a class constructs an instance

    def _returns_kind(
        self, path: str, instance: Optional[Instance], results: Optional[tuple], depth: int, element: Optional[int] = None
    ) -> Optional[Kind]:
        """The one kind every return gives (or its element `element` gives); its dim where they
        agree on it."""
        if not results:
            return None
        kinds = []
        for result in results:
            found = self._result_kind(path, instance, result, depth, element)
            if found is None:
                return None
            kinds.append(found)
        if len({k for k, _ in kinds}) != 1:
            return None
        dims = {d for _, d in kinds}
        return kinds[0][0], dims.pop() if len(dims) == 1 else None

    def _result_kind(
        self, path: str, instance: Optional[Instance], result: Optional[tuple], depth: int, element: Optional[int]
    ) -> Optional[Kind]:
        """The kind one result gives, or its element `element`."""
        if result is None or depth > _DEPTH:
            return None
        tag = result[0]
        if tag == "tuple":
            if element is None or not -len(result[1]) <= element < len(result[1]):
                return None
            return self._result_kind(path, instance, result[1][element], depth, None)  # a part of `result`
        if tag == "elt":  # `return self.head(x)[1]`
            whole = self.callee_kind(path, instance, result[1], depth + 1, result[2])
            return whole if element is None else None
        if tag == "kind":
            return (result[1], result[2]) if element is None else None
        return self.callee_kind(path, instance, result[1], depth + 1, element)

    def _forward_kind(self, instance: Instance, depth: int, element: Optional[int] = None) -> Optional[Kind]:
        found = self._member(instance, "forward", depth)
        if found is None or found[0] != "method":
            return None
        return self._returns_kind(found[1], instance, found[2], depth + 1, element)

    def _member_kind(self, instance: Instance, name: str, depth: int, element: Optional[int] = None) -> Optional[Kind]:
        """`self.name(...)` in code of the class `instance`: None where a subclass in the project
        redefines `name` (self may be one of its instances)."""
        if self._overridden(instance, name):
            return None
        found = self._member(instance, name, depth)
        if found is None:
            return None
        what, where, fact = found
        if what == "method":
            return self._returns_kind(where, instance, fact, depth + 1, element)
        return self.callee_kind(where, instance, fact, depth + 1, element)

    def instance_class(self, path: str, instance: Optional[Instance], callee: Optional[tuple]) -> Optional[Instance]:
        """The project class of the object that `callee` (a callee fact read in the file at
        `path`, `self` an instance of `instance`) holds: `("new", "Head")` for `Head(d)`,
        `("self", "head")` for `self.head` assigned `Head(d)` once in `__init__`; None when not
        known, or where a subclass of `instance` may assign that attribute again."""
        if callee is None:
            return None
        if callee[0] == "self":
            if instance is None or self._overridden(instance, callee[1]):
                return None
            found = self._member(instance, callee[1], 0)
            if found is None or found[0] != "attr":
                return None
            path, callee = found[1], found[2]
            if callee is None:
                return None
        if callee[0] != "new":
            return None
        cls = self._resolve(path, callee[1], 0)
        return (cls[1], cls[2]) if cls is not None and cls[0] == "class" else None

    def _member(self, cls: Instance, name: str, depth: int) -> Optional[Tuple[str, str, Optional[tuple]]]:
        """("method", path, results) or ("attr", path, callee) for `name` on the class or its
        project bases, first found; None where the class both defines and assigns it."""
        owner = self._owner(cls, name, depth)
        if owner is None:
            return None
        info = self.files[owner[0]].classes[owner[1]]  # type: ignore[union-attr]
        return ("method", owner[0], info.methods[name]) if name in info.methods else ("attr", owner[0], info.attrs[name])

    def _owner(self, cls: Instance, name: str, depth: int) -> Optional[Instance]:
        """The class, `cls` or a project base, whose body gives `name` (first found); None where
        that class both defines and assigns it."""
        path, cls_name = cls
        summary = self.files.get(path)
        info = summary.classes.get(cls_name) if summary is not None else None
        if info is None or depth > _DEPTH:
            return None
        if name in info.methods or name in info.attrs:
            return None if name in info.methods and name in info.attrs else cls
        for base in info.bases:
            found = self._resolve(path, base, depth + 1)
            if found is not None and found[0] == "class":
                owner = self._owner((found[1], found[2]), name, depth + 1)
                if owner is not None:
                    return owner
        return None

    def _overridden(self, cls: Instance, name: str) -> bool:
        """Whether a project class deriving from `cls` (at any depth) defines or assigns `name`."""
        key = (cls, name)
        if key not in self._overrides:
            self._overrides[key] = self._find_override(cls, name)
        return self._overrides[key]

    def _find_override(self, cls: Instance, name: str) -> bool:
        if self._subclasses is None:
            self._subclasses = {}
            for path, summary in self.files.items():
                for cls_name, info in summary.classes.items() if summary is not None else ():
                    for base in info.bases:
                        self._subclasses.setdefault(base.rpartition(".")[2], []).append((path, cls_name))
        seen: Set[Instance] = {cls}
        todo = [cls]
        while todo:
            current = todo.pop()
            for sub in self._subclasses.get(current[1], ()):
                summary = self.files[sub[0]]
                assert summary is not None  # `_subclasses` holds classes of the files that were read
                if sub in seen or not any(self._resolve(sub[0], base, 0) == ("class", *current) for base in summary.classes[sub[1]].bases):
                    continue
                info = summary.classes[sub[1]]
                if name in info.methods or name in info.attrs:
                    return True
                seen.add(sub)
                todo.append(sub)
        return False

    def callee_no_grad(self, path: str, instance: Optional[Instance], callee: Optional[tuple], depth: int = 0) -> bool:
        """Whether calling `callee` (resolved as by `callee_kind`) runs a project function or
        method that runs without autograd (`FileSummary.no_grad`): a function, an instance of a
        class whose `forward` does (`self.prop(x)` with `self.prop = LabelPropagation(...)`),
        a method of `self` that no subclass in the project redefines."""
        if callee is None or depth > _DEPTH:
            return False
        tag = callee[0]
        if tag == "self":
            if instance is None or self._overridden(instance, callee[1]):
                return False
            owner = self._owner(instance, callee[1], depth + 1)
            if owner is None:
                return False
            info = self.files[owner[0]].classes[owner[1]]  # type: ignore[union-attr]  # `_owner` finds classes of files read
            if callee[1] in info.methods:
                return self._method_no_grad(owner, callee[1])
            return self.callee_no_grad(owner[0], owner, info.attrs[callee[1]], depth + 1)
        if tag == "act":
            return False
        found = self._resolve(path, callee[1], depth + 1)
        if found is None:
            return False
        what, where, name = found
        summary = self.files[where]
        assert summary is not None  # `_resolve` finds names only in files that were read
        if tag == "new":
            if what != "class":
                return False
            owner = self._owner((where, name), "forward", depth + 1)
            return owner is not None and self._method_no_grad(owner, "forward")
        if what == "function":
            return name in summary.no_grad
        if what == "value":
            return self.callee_no_grad(where, None, summary.values[name], depth + 1)
        return False

    def _method_no_grad(self, owner: Instance, name: str) -> bool:
        summary = self.files.get(owner[0])
        return summary is not None and f"{owner[1]}.{name}" in summary.no_grad

    # -- callers -----------------------------------------------------------------------------------
    def callers(self, path: str, cls: Optional[str], name: str) -> List[CallerSite]:
        """The call sites, in files other than `path`, of the function `name` defined there (a
        method of `cls` when given), and for a method also those in `path` through an instance
        (`self.`/`cls.` calls in its own class are `rules/callers.py`'s). Sorted by path and line."""
        key = (path, cls, name)
        if key not in self._callers:
            found = {
                CallerSite(where, fact[3], fact[4], fact[0] != "name")
                for where, fact in self._calls_named(path, cls, name)
                if self._call_target(where, fact) == key
            }
            self._callers[key] = sorted(found)
        return self._callers[key]

    def _calls_named(self, path: str, cls: Optional[str], name: str) -> Iterable[Tuple[str, CallFact]]:
        """The call facts that may call `name` of `path` (a method of `cls`): every one whose
        `call_names` hold `name` (a lazy project's reads only the files that can call it)."""
        return self._named_calls().get(name, ())

    def _named_calls(self) -> Mapping[str, List[Tuple[str, CallFact]]]:
        """Every call fact of the project by the name of what it may call (`call_names`)."""
        if self._calls is None:
            self._calls = named_calls(self.files)
        return self._calls

    def use_calls(self, make: Callable[[], Mapping[str, List[Tuple[str, CallFact]]]]) -> None:
        """Take what `make` gives as `_named_calls()` unless that is made already: the server keeps
        the other files' part between changes (`server/calls.py`); a call's names read its own file only."""
        if self._calls is None:
            self._calls = make()

    def _call_target(self, where: str, fact: CallFact) -> Optional[Tuple[str, Optional[str], str]]:
        """What the call `fact` of the file `where` calls: (path, class or None, name) of a project
        function or method, None when unknown. A function is never its own file's (its calls by
        name are `rules/callers.py`'s), nor a method called through `self` in its own class."""
        form, owner, member = fact[:3]
        if form == "name":
            named = self._resolve(where, owner, 0)
            return (named[1], None, named[2]) if named is not None and named[0] == "function" and named[1] != where else None
        if form == "attr":
            holder, _, attr = owner.partition(".")
            at = self._owner((where, holder), attr, 0)
            if at is None:
                return None
            info = self.files[at[0]].classes[at[1]]  # type: ignore[union-attr]
            if attr in info.methods:  # `self.helper(x)`: one in its own class is seen in that file
                return (at[0], at[1], attr) if member == "forward" and (where, holder) != at else None
            callee = info.attrs.get(attr)
            if callee is None or callee[0] != "new":
                return None
            where, owner = at[0], callee[1]
        found = self._resolve(where, owner, 0)
        if found is None or found[0] != "class":
            return None
        method = self._owner((found[1], found[2]), member, 0)
        return (method[0], method[1], member) if method is not None else None

    # -- names -------------------------------------------------------------------------------------
    def _resolve(self, path: str, dotted: str, depth: int) -> Optional[Tuple[str, str, str]]:
        """("function" | "class" | "value", path, name) that `dotted` names in the file at `path`,
        through its imports into other project files; None when unknown or ambiguous."""
        key = (path, dotted, depth)
        if key not in self._resolved:
            self._resolved[key] = self._resolve_name(path, dotted, depth)
        return self._resolved[key]

    def _resolve_name(self, path: str, dotted: str, depth: int) -> Optional[Tuple[str, str, str]]:
        summary = self.files.get(path)
        if summary is None or depth > _DEPTH:
            return None
        head, _, rest = dotted.partition(".")
        if head in summary.ambiguous:
            return None
        if not rest:
            for what, table in (("function", summary.functions), ("class", summary.classes), ("value", summary.values)):
                if head in table:
                    return what, path, head
        target = summary.imports.get(head)
        if target is None:
            return None
        anchor, qual = target
        parts = (qual + ("." + rest if rest else "")).split(".")
        for cut in range(len(parts) - 1, -1 if anchor else 0, -1):
            module = self._module_path(anchor, "/".join(parts[:cut]))
            if module is not None:
                return self._resolve(module, ".".join(parts[cut:]), depth + 1) if module != path else None
        return None

    def _module_path(self, anchor: str, module: str) -> Optional[str]:
        """The one project file that is `module` (a "/"-separated path) relative to `anchor`, or
        anywhere (as a suffix) for an absolute import."""
        key = (anchor, module)
        if key not in self._modules:
            self._modules[key] = self._find_module(anchor, module)
        return self._modules[key]

    def _find_module(self, anchor: str, module: str) -> Optional[str]:
        if self._stems is None:
            self._stems = {}
            for path in self.files:
                parts = module_stem(path)[0].split("/")
                for start in range(len(parts)):
                    self._stems.setdefault("/".join(parts[start:]), []).append(path)
        if anchor:
            stem = posixpath.normpath(posixpath.join(anchor, module)) if module else anchor
            found = [p for p in self._stems.get(stem.rpartition("/")[2], ()) if module_stem(p)[0] == stem]
        else:
            found = self._stems.get(module, [])
        return found[0] if len(found) == 1 else None
