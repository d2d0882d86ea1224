"""Shared questions about values: is it a softmax, is it guarded, is it a plain Python number,
does it carry a gradient, is it a mask, can it be recomputed. Every rule asks these the same
way, so they are answered once, here.

Every question is asked of every value a name may hold (`ways`: each assignment that reaches it,
`FileContext.reaching`, and both values of a conditional expression), with the quantifier that
keeps findings precise: a value is guarded, detached, a Python number, constant, a mask or
positive only when EVERY way says so (`every_way`); a guard on one branch does not guard the
other. Answers are kept per name for the scope, so a name read many times, or rebound in a loop,
is followed once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, Tuple, TypeVar

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.gradients import runs_with_grad, runs_without_grad
from torchnumlint.rules.names import OPS, Binding, CallMatch, match_call, selection_of
from torchnumlint.rules.producers import call_kind
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

T = TypeVar("T")
_EPS_WORDS = ("eps", "epsilon", "tiny", "smooth")
_BUILTIN_NUMBERS = {"len", "int", "float", "round", "abs", "min", "max", "sum", "pow", "divmod"}
_SHAPE_METHODS = {"size", "numel", "dim", "nelement", "item", "__len__", "count"}
_SHAPE_ATTRS = {"shape", "ndim"}
_NON_TORCH_MODULES = ("math.", "numpy.", "np.", "random.", "statistics.")
# Python floats, never tensors. inf counts here only: it is a number, but no guard (is_eps_like).
_NUMBER_CONSTANTS = {f"{m}.{c}" for m in ("math", "torch", "numpy") for c in ("pi", "e", "tau", "inf")}
_CASTS = {"float", "double", "half", "bfloat16", "long", "int", "bool", "to", "type_as", "type"}
_BOOL_FUNCS = {"torch.logical_and", "torch.logical_or", "torch.logical_not", "torch.logical_xor",
               "torch.isfinite", "torch.isnan", "torch.isinf", "torch.eq", "torch.ne", "torch.gt",
               "torch.lt", "torch.ge", "torch.le", "torch.isin"}
_BOOL_METHODS = {"eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not", "isfinite",
                 "isnan", "isinf", "bool"}
_MASK_WORDS = frozenset({"mask", "masks", "valid", "keep"})
# Methods that change a mask's shape, not what it selects.
_RESHAPES = vocabulary.SHAPE_ONLY | vocabulary.REPEATS | vocabulary.DEVICE_MOVES | {"to", "type", "type_as"}
# words that make a mask-like name a number: `keep_prob`, `mask_ratio`
_NOT_MASK_WORDS = frozenset({"prob", "probs", "rate", "ratio", "p"})
_POSITIVE = ("exp", "softmax", "sigmoid", "softplus")
_TENSOR_OF = ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor")
# Tensors made from data: no gradient unless asked for with requires_grad=True.
_DATA = {"torch.tensor", "torch.Tensor", "torch.as_tensor", "torch.from_numpy", "torch.FloatTensor",
         "torch.LongTensor", "torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.eye",
         "torch.arange", "torch.linspace"}


def strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    """LibCST keeps parentheses on the node itself; this is the same node without them (an empty
    tuple keeps its own: `()` is nothing without them)."""
    if getattr(expr, "lpar", None) and not (isinstance(expr, cst.Tuple) and not expr.elements):
        return expr.with_changes(lpar=[], rpar=[])
    return expr  # `()` cannot lose its parentheses: LibCST refuses a bare empty tuple


# ---------------------------------------------------------------------------------------------
# Every value a name may hold


@dataclass(frozen=True)
class Way:
    """One value an expression may hold: `value` is the assigned expression (or, for a binding
    with no plain value, its node: a parameter, an in-place call `d.clamp_(min=eps)`, a loop or
    an unpacking statement); `binding` the assignment (None for a branch of a conditional
    expression); `where` the node a message points at, `label` how it names this way."""

    value: cst.CSTNode
    binding: Optional[Binding]
    where: cst.CSTNode
    label: str


def ways(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[List[Way]]:
    """The values `expr` holds one step back: for a name (or `self.attr`, a module name bound
    once) every assignment that may reach it here; for a conditional expression both its values.
    None for anything else, or a name nothing here binds."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.IfExp):
        return [Way(expr.body, None, expr, "if"), Way(expr.orelse, None, expr, "else")]
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    binding = ctx.binding(expr)
    found = [binding] if binding is not None else ctx.reaching(expr)
    if not found:
        return None
    label = expr.value if isinstance(expr, cst.Name) else ctx.module.code_for_node(expr)
    return [Way(b.value if b.value is not None else b.node, b, b.node, label) for b in found]


def branches(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[List[Way]]:
    """`ways` where there is more than one (an `if` that assigns on both branches, a loop that
    rebinds, a conditional expression); None where the value is one or unknown."""
    found = ways(ctx, expr)
    return found if found is not None and len(found) > 1 else None


def way_note(ctx: "FileContext", way: Way) -> str:
    """How a message names one of several ways, as a clause that fits inside its parentheses
    too: `, as `d` is assigned on line 7`, `, the else value of the conditional on line 7`."""
    span = ctx.positions.get(way.where)
    line = f" on line {span.start.line}" if span is not None else ""
    if way.binding is None:
        return f", the {way.label} value of the conditional{line}"
    return f", as `{way.label}` is assigned{line}"


def unless_asking(ctx: "FileContext", key: str, node: cst.CSTNode, ask: Callable[[], T], default: T) -> T:
    """`ask()`, the question `key` about `node`, unless it is being asked already further up (a
    loop's `d = d * w` leads back to `d`): then `default`, the answer that adds nothing."""
    asking: Set[Tuple[str, int]] = ctx.per_scope("asking", lambda _: set())
    slot = (key, id(node))
    if slot in asking:
        return default
    asking.add(slot)
    try:
        return ask()
    finally:
        asking.discard(slot)


_IN_PROGRESS = object()
_DEPTH = 8


def every_way(
    ctx: "FileContext",
    expr: cst.BaseExpression,
    key: str,
    test: Callable[[cst.CSTNode], bool],
    decided: Optional[Callable[[Binding], bool]] = None,
    depth: int = _DEPTH,
) -> bool:
    """Whether `test` holds of every value `expr` may hold (`ways`, followed `depth` steps; a
    value with no ways is tested itself). `decided(binding)` True settles a way without looking
    at its value (assigned under `no_grad`: detached). Answers are kept per scope and `key`; a
    way that leads back to a name being asked (a loop's `n = n + 1`) adds no value of its own."""
    found = ways(ctx, expr)
    if found is None:
        return test(expr)
    if not depth:
        return False  # too far to say anything of every way
    known: Dict[Tuple[str, int], tuple] = ctx.per_scope("every way", lambda _: {})
    asking: List[list] = ctx.per_scope("every way asking", lambda _: [])  # [slot, tentative]
    slot = (key, id(expr))
    entry = known.get(slot)
    if entry is not None:
        if entry[1] is _IN_PROGRESS:  # a loop back: what is asked between relies on this answer
            at = next(i for i, frame in enumerate(asking) if frame[0] == slot)
            for frame in asking[at + 1 :]:
                frame[1] = True
            return True
        return entry[1]
    known[slot] = (expr, _IN_PROGRESS)  # the node is kept with its answer: its id stays its own
    frame = [slot, False]
    asking.append(frame)
    try:
        answer = all(
            (decided is not None and way.binding is not None and decided(way.binding))
            or (
                every_way(ctx, way.value, key, test, decided, depth - 1)
                if isinstance(way.value, cst.BaseExpression)
                else test(way.value)
            )
            for way in found
        )
    finally:
        asking.pop()
    if frame[1] and answer:
        del known[slot]  # true only on the assumption of an answer still being worked out
    else:
        known[slot] = (expr, answer)
    return answer


def number_value(expr: cst.BaseExpression) -> Optional[float]:
    """The value of a numeric literal (with an optional unary minus), else None."""
    sign = 1.0
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        sign = -1.0 if isinstance(expr.operator, cst.Minus) else 1.0
        expr = expr.expression
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return sign * float(expr.evaluated_value)
        except (ValueError, OverflowError):  # pragma: no cover - literal forms always evaluate
            return None
    return None


def _last_identifier(expr: cst.CSTNode) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Param):  # a parameter, where a name's way ends
        return expr.name.value
    return None


def is_eps_like(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A small positive guard: `eps`, `self.eps`, `1e-8`, `torch.finfo(x.dtype).tiny`, `tensor(eps)`,
    whatever way the value comes (`eps = 1e-4 if half else 1e-8`)."""
    return every_way(ctx, expr, "eps", lambda value: _eps_like(ctx, value))


def _eps_like(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    value = number_value(expr) if isinstance(expr, cst.BaseExpression) else None
    if value is not None:
        return value > 0
    ident = _last_identifier(expr)
    if ident is not None and any(word in ident.lower() for word in _EPS_WORDS):
        return True
    if isinstance(expr, cst.Call):
        if expr.args and ctx.qualname(expr.func) in ("torch.tensor", "torch.as_tensor", "torch.full_like"):
            return any(is_eps_like(ctx, a.value) for a in expr.args)
        ident = _last_identifier(expr.func)
        return ident is not None and "eps" in ident.lower()
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return is_eps_like(ctx, expr.left) or is_eps_like(ctx, expr.right)
    return False


def is_guarded(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Kept away from 0 (or from its domain's edge): `+ eps`, `clamp(min=)`, `clamp_min`,
    `torch.maximum(d, eps)`, `max(d, eps)`, `torch.where(...)`, `masked_fill`, `torch.finfo`.

    Any floor counts, `clamp(min=0)` included: enough for a log or a division by a count, though
    `sqrt` of it still has an infinite gradient at 0 (no rule asks that of a clamped value yet).
    A name is guarded only when every assignment that reaches it is (a guard on one branch of an
    `if` leaves the other's zero); an in-place `d.clamp_(min=eps)` is such an assignment."""
    return every_way(ctx, expr, "guarded", lambda value: _guarded(ctx, value))


def _guarded(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False  # a parameter, a loop target, an unpacking: nothing says it is guarded
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return is_eps_like(ctx, expr.left) or is_eps_like(ctx, expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)):
        # guarded * anything-nonzero is still guarded only when both sides are; stay simple
        return is_guarded(ctx, expr.left) and is_guarded(ctx, expr.right)
    clamp = match_call(ctx.imports, expr, "clamp", "clip", "clamp_", "clamp_min", "clamp_min_")
    if clamp is not None:
        return clamp.given("min")
    if match_call(ctx.imports, expr, "maximum") is not None:
        return True
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        if qual in ("torch.where", "torch.nan_to_num") or _last_identifier(expr.func) in ("masked_fill", "nan_to_num"):
            return True
        if isinstance(expr.func, cst.Name) and expr.func.value == "max" and qual is None:
            return any(is_eps_like(ctx, a.value) for a in expr.args)
        if qual == "torch.max" and len(expr.args) == 2:
            return is_eps_like(ctx, expr.args[1].value) or is_eps_like(ctx, expr.args[0].value)
    return _mentions_finfo(expr)


def _mentions_finfo(expr: cst.CSTNode) -> bool:
    found = []

    class _Find(Visitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if node.attr.value == "finfo":
                found.append(node)
            return not found

        def visit_Name(self, node: cst.Name) -> bool:
            if node.value == "finfo":
                found.append(node)
            return False

    _Find().walk(expr)
    return bool(found)


def is_python_number(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A plain Python number: literals, `len(...)`, shapes and sizes, `math.*`, and arithmetic of
    those, on every way the value comes. Division by or sqrt of these never makes a NaN gradient."""
    return every_way(ctx, expr, "python", lambda value: _python_number(ctx, value))


def _python_number(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    if number_value(expr) is not None:
        return True
    if isinstance(expr, cst.BinaryOperation):
        return is_python_number(ctx, expr.left) and is_python_number(ctx, expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return is_python_number(ctx, expr.expression)
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value in _SHAPE_ATTRS
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _SHAPE_ATTRS or ctx.qualname(expr) in _NUMBER_CONSTANTS
    if isinstance(expr, cst.Call):
        func = expr.func
        qual = ctx.qualname(func)
        if qual is not None:
            return qual.startswith(_NON_TORCH_MODULES)
        if isinstance(func, cst.Name):
            return func.value in _BUILTIN_NUMBERS
        if isinstance(func, cst.Attribute):
            return func.attr.value in _SHAPE_METHODS
    return False


def is_constant(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A Python number, or a tensor made of one (`torch.tensor(d_k)`, through casts): the same
    value on every call, so never the 0 of an empty or constant row. Every way must be one."""
    return every_way(ctx, expr, "constant", lambda value: _constant(ctx, value))


def _constant(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    if is_python_number(ctx, expr):
        return True
    inner = unwrap_casts(ctx, expr, names=False)
    if ways(ctx, inner) is not None:
        return is_constant(ctx, inner)
    if isinstance(inner, cst.Call) and ctx.qualname(inner.func) in _TENSOR_OF:
        return bool(inner.args) and is_python_number(ctx, inner.args[0].value)
    return False


def unwrap_casts(
    ctx: "FileContext", expr: cst.BaseExpression, detach: bool = False, names: bool = True
) -> cst.BaseExpression:
    """Through names (their one sure assignment; `names=False`: not at all), `.float()`,
    `.to(...)`, `.type_as(...)` (and `.detach()` when asked), indexing, selections and reshapes
    (`names.selection_of`): these keep zeros and signs, so the question is about the value
    under them. `expr` itself (the same node) where there is nothing to look through."""
    methods = _CASTS | {"detach"} if detach else _CASTS
    start = expr
    for _ in range(8):
        if names:
            expr = ctx.resolve(expr)
        bare = strip_parens(expr)
        inner = selection_of(ctx.imports, bare)
        if inner is not bare:  # `n.unsqueeze(-1)`, `n[:, None]`: the same values
            expr = inner
            continue
        if (
            isinstance(bare, cst.Call)
            and isinstance(bare.func, cst.Attribute)
            and bare.func.attr.value in methods
            and not ctx.imports.is_module_ref(bare.func.value)
        ):
            expr = bare.func.value
            continue
        break
    return expr if expr is start and not names else strip_parens(expr)


def is_mask(ctx: "FileContext", expr: cst.BaseExpression, by_name: bool = True) -> bool:
    """A boolean mask: a comparison, `~m`, `logical_*`, `isfinite`, or (`by_name`) a name that
    says mask/valid/keep, through casts, reshapes and indexing (`mask.float().unsqueeze(-1)`,
    `masks[0]`). Its sum is a count, which is 0 when nothing is selected; only a mask built as a
    boolean is sure to sum to an integer (a mask by name can be soft). A name no word marks is a
    mask when every assignment that reaches it makes one."""
    if by_name and says_mask(_last_identifier(strip_parens(expr))):
        return True
    return every_way(ctx, expr, f"mask {by_name}", lambda value: _mask(ctx, value, by_name))


def _mask(ctx: "FileContext", expr: cst.CSTNode, by_name: bool) -> bool:
    for _ in range(8):
        if by_name and says_mask(_last_identifier(expr)):
            return True
        if not isinstance(expr, cst.BaseExpression):
            return False
        if ways(ctx, expr) is not None:  # `m.float()` of a name: every way it comes
            return is_mask(ctx, expr, by_name)
        expr = unwrap_casts(ctx, expr, names=False)
        if ways(ctx, expr) is not None:
            return is_mask(ctx, expr, by_name)
        if isinstance(expr, cst.Comparison):
            return True
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return True
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
            return is_mask(ctx, expr.left, by_name) or is_mask(ctx, expr.right, by_name)
        if isinstance(expr, cst.Subscript):
            expr = expr.value
            continue
        if isinstance(expr, cst.Call):
            if ctx.qualname(expr.func) in _BOOL_FUNCS:
                return True
            func = expr.func
            if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
                if func.attr.value in _BOOL_METHODS:
                    return True
                if func.attr.value in _RESHAPES:
                    expr = func.value
                    continue
            return False
        return by_name and says_mask(_last_identifier(expr))
    return False


def says_mask(ident: Optional[str]) -> bool:
    """`attn_mask`, `cmasks`, `padmask`, `valid`, `keep`; `invalid_x` is no `valid`, `keep_prob`
    no mask."""
    if ident is None:
        return False
    said_words = words(ident)
    said = any(word in _MASK_WORDS or word.endswith(("mask", "masks")) for word in said_words)
    return said and not said_words & _NOT_MASK_WORDS


def words(ident: Optional[str]) -> Set[str]:
    """The lower-case words of an identifier (`keyPaddingMask`, `key_padding_mask`)."""
    if not ident:
        return set()
    return set(re.findall(r"[a-z]+", re.sub(r"(?<=[a-z])(?=[A-Z])", "_", ident).lower()))


def is_positive(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """exp / softmax / sigmoid / softplus (through casts): never negative, and 0 only by
    underflow, which is the log-domain rules' hazard, not a guard's. Every way must be one."""
    return every_way(ctx, expr, "positive", lambda value: _positive(ctx, value))


def _positive(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False
    inner = unwrap_casts(ctx, expr, names=False)
    if ways(ctx, inner) is not None:
        return is_positive(ctx, inner)
    return match_call(ctx.imports, inner, *_POSITIVE) is not None


def code_key(ctx: "FileContext", expr: cst.BaseExpression) -> str:
    """`expr`'s code without parentheses and white space: equal keys, the same code."""
    return "".join(ctx.module.code_for_node(strip_parens(expr)).split())


def same_code(ctx: "FileContext", a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Whether two expressions are written the same (parentheses and white space aside)."""
    return code_key(ctx, a) == code_key(ctx, b)


def is_tested(ctx: "FileContext", *exprs: cst.BaseExpression) -> bool:
    """Whether the enclosing function tests one of `exprs` in its control flow (`if n > 0:`,
    `x / n if n else 0`, `assert v.min() >= 0`): the author has handled the edge case. A
    comparison that only selects or overwrites the result afterwards (`torch.where(n > 0, x / n,
    0)`, `out[n == 0] = 0`) keeps the forward finite, not the gradient: it does not count."""
    texts = ctx.per_scope("tested", lambda scope: _tested_texts(ctx, scope))
    return any(code_key(ctx, e) in texts for e in exprs)


def _tested_texts(ctx: "FileContext", scope: cst.CSTNode) -> Set[str]:
    texts: Set[str] = set()

    def add(expr: cst.BaseExpression) -> None:
        expr = strip_parens(expr)
        while isinstance(expr, cst.Call):  # `n.item() > 0`, `int(n)`, `v.min() >= 0`
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "all", "any", "min", "max") and not expr.args:
                expr = strip_parens(func.value)
            elif isinstance(func, cst.Name) and func.value in ("int", "float", "bool") and len(expr.args) == 1:
                expr = strip_parens(expr.args[0].value)
            else:
                break
        if isinstance(expr, cst.UnaryOperation):
            expr = strip_parens(expr.expression)
        texts.add(code_key(ctx, expr))

    class _Comparisons(Visitor):
        def visit_Comparison(self, node: cst.Comparison) -> None:
            add(node.left)
            for target in node.comparisons:
                add(target.comparator)

    class _Tests(Visitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.If, cst.IfExp, cst.While, cst.Assert)):
                test = node.test
                if not isinstance(strip_parens(test), cst.Comparison):
                    add(test)
                _Comparisons().walk(test)
            return super().on_visit(node)

    _Tests().walk(scope)
    return texts


def softmax_call(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """The softmax call (any alias, or the method form) that `expr` holds values of, through
    names, indexing, selections and reshapes (`FileContext.origins`); where several assignments
    may reach, all must be softmaxes (the first is returned: a fix must not use it unless
    `ctx.binding` gives the one assignment)."""
    return _made_by(ctx, expr, "softmax")


def sigmoid_call(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """As `softmax_call`, for a sigmoid: `torch.sigmoid`, `F.sigmoid`, `torch.special.expit`,
    any alias of them, or the method form `x.sigmoid()`."""
    return _made_by(ctx, expr, "sigmoid")


def _made_by(ctx: "FileContext", expr: cst.BaseExpression, op: str) -> Optional[CallMatch]:
    """The first call of `op` that `expr` comes from, when every origin is one: written out, or
    (the last resort, `producers.call_kind`) a helper, method or module instance that returns
    one. A produced one is matched as the call with its first argument as input (form
    "producer", no other arguments: nothing to rebuild it from)."""
    matches = []
    for origin in ctx.origins(expr):
        match = match_call(ctx.imports, origin, op)
        if match is None and isinstance(origin, (cst.Call, cst.Name)):  # a name: an element of a tuple returned
            produced = call_kind(ctx, origin)
            if produced is not None and produced.kind == op:
                call = produced.call
                first = call.args[0].value if call.args and not call.args[0].star else call
                match = CallMatch(OPS[op], call, first, "producer")
        if match is None:
            return None
        matches.append(match)
    return matches[0] if matches else None


def is_detached(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """No gradient flows back through `expr`: it is `.detach()`ed, or was computed under
    `torch.no_grad()` in this function; for a call, so is its tensor input. A name is detached
    only when every assignment that reaches it is (a target detached on one branch still
    carries the other's gradient)."""
    return every_way(ctx, expr, "detached", lambda value: _detached(ctx, value), lambda binding: binding.no_grad)


def _detached(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    for _ in range(8):
        if not isinstance(expr, cst.BaseExpression):
            return False  # a parameter, a loop target: may carry a gradient
        if ways(ctx, expr) is not None:
            return is_detached(ctx, expr)
        if match_call(ctx.imports, expr, "detach") is not None:
            return True
        if isinstance(expr, cst.Call) and ctx.qualname(expr.func) in _DATA:
            return not any(a.keyword is not None and a.keyword.value == "requires_grad" for a in expr.args)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ("detach", "detach_", "data"):
                return True
            if ctx.imports.is_module_ref(expr.func.value):
                # function form: look at the tensor input (first argument)
                if not expr.args:
                    return False
                expr = expr.args[0].value
            else:
                expr = expr.func.value  # method form: the receiver
            continue
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return True
        if isinstance(expr, cst.UnaryOperation):
            expr = expr.expression
            continue
        if isinstance(expr, cst.BinaryOperation):
            # `t / T`, `t.detach() * self.scale`: detached when one side is and the other is a
            # number or a plain name (a temperature), not a computation that may carry a gradient
            sides = [s for s in (expr.left, expr.right) if not is_python_number(ctx, s)]
            detached = [s for s in sides if is_detached(ctx, s)]
            return bool(detached) and all(
                s in detached or isinstance(strip_parens(s), (cst.Name, cst.Attribute)) for s in sides
            )
        return False
    return False


def module_call(ctx: "FileContext", call: cst.Call, *classes: str) -> Optional[cst.Call]:
    """For `nn.KLDivLoss(...)(a, b)`, `crit(a, b)` or `self.crit(a, b)` where the callee was built
    from one of `classes` (qualified names), the constructor call; else None."""
    if not any(ctx.mentions(cls.rsplit(".", 1)[-1]) for cls in classes):
        return None  # following every callee's name would cost a scope scan per call
    func = call.func
    ctor = func if isinstance(func, cst.Call) else ctx.resolve(func)
    if isinstance(ctor, cst.Call) and ctx.qualname(ctor.func) in classes:
        return ctor
    return None


# What a gradient claim made without code that shows a gradient says, in strict mode.
STRICT_GRADIENT = " (strict mode: no code here is shown to differentiate it)"


def gradient_note(ctx: "FileContext") -> Optional[str]:
    """For a claim about a gradient at the node being visited: "" where the code shows that a
    gradient flows (`runs_with_grad`, and the value is not only read as a number); in strict
    mode `STRICT_GRADIENT` where it merely is not gradient-free; None where the claim is not
    to be made."""
    if gradient_free(ctx):
        return None
    if runs_with_grad(ctx):
        return ""
    return STRICT_GRADIENT if ctx.strict else None


_TO_PYTHON = {"float", "int", "bool"}
_DETACHING = {"item", "tolist", "detach", "numpy"}


def gradient_free(ctx: "FileContext") -> bool:
    """No gradient flows back through the node being visited: it runs without autograd
    (`gradients.runs_without_grad`: no_grad, evaluation, generation, data code), or its value is
    only read as a Python number (`float(...)`, `.item()`, `.numpy()`) or detached."""
    if runs_without_grad(ctx):
        return True
    for node in reversed(ctx.stack[:-1]):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
        if isinstance(node, cst.Attribute) and node.attr.value in _DETACHING:
            return True
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value in _TO_PYTHON
            and ctx.qualname(node.func) is None
        ):
            return True
    return False


_REFERENCE = re.compile(r"^(ref|reference|np_ref|numpy_ref)(_|$)|_(ref|reference)$")


def in_reference_implementation(ctx: "FileContext") -> bool:
    """Whether the node being visited is in a test's reference implementation of an op: a lambda
    passed as `reference_fn=` / `ref=` (torch's module-test tables), or a function named for one
    (`reference_softmax`, `ref_logsumexp`, `softmax_ref`). A reference is written the naive way
    on purpose, to check the real op against, on inputs the test bounds: a by-hand rule has
    nothing to tell its author."""
    stack = ctx.stack
    for i in range(len(stack) - 1, 0, -1):
        node = stack[i]
        if isinstance(node, cst.Lambda):
            parent = stack[i - 1]
            if isinstance(parent, cst.Arg) and parent.keyword is not None and _REFERENCE.search(parent.keyword.value):
                return True
        elif isinstance(node, cst.FunctionDef) and _REFERENCE.search(node.name.value):
            return True
    return False
