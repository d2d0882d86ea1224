"""What the masking rules share: where a value was filled with `-inf`, and whether that fill can
cover a whole row.

A `-inf` fill is found backwards from where the value is used (a softmax, a cross entropy),
through names (every reaching assignment, `self.x` and module names bound once), the steps that
keep values (`value_steps.selection_of`: indexing, reshapes, float casts) and additions, which make an
additive mask of it:

- `s.masked_fill(m, -inf)`, `torch.masked_fill(s, m, -inf)`, `torch.where(m, -inf, s)`;
- in place: `s.masked_fill_(m, -inf)`, `s[m] = -inf` (the scope table records both as a
  rebinding of `s` with no value), and through `.data` (`s.data.masked_fill_(m, -inf)`, which
  binds nothing: found by a scan of the function, before the use and with `s` not rebound since);
- an additive mask: `torch.full(shape, -inf)`, `torch.full_like(x, -inf)`, the log of a 0/1
  mask (`s + keep.log()`, `s + torch.log(mask.float())`: 0 where kept, -inf elsewhere; measured,
  torch 2.13 CPU: a row with nothing kept is NaN in the softmax and in every gradient entry of its
  scores), or any fill above, added to the scores (`s + mask`, `s += mask`, `torch.add`).

`-inf` is `float("-inf")`, `-float("inf")`, `-math.inf`, `-torch.inf`, `-np.inf`, or a name or
attribute holding one (a module constant, `self.neg_inf`). A large finite fill (`-1e9`,
`torch.finfo(...).min`) is no `-inf` fill: its hazard is float16 overflow, another rule's.

A fill cannot cover a whole row when its mask is strictly causal: `torch.triu(ones, diagonal=1)`
(the diagonal and everything below kept), `torch.tril(ones) == 0`, `~torch.tril(ones).bool()`,
`torch.triu(torch.full(shape, -inf), diagonal=1)`, also as a registered buffer
(`self.register_buffer("bias", torch.tril(torch.ones(n, n)))` read as `self.bias[:, :, :T, :T] == 0`).
Column 0 is then never masked, in any top-left slice of it. Nor can a row be covered by a top-k
filter (`x[x < x.topk(k).values[..., -1:]] = -inf`: the top k stay) or by an index assignment
that selects columns (`logits[:, suppressed_ids] = -inf`: a vocabulary's suppressed tokens).

Those exemptions are for a softmax, where only a whole masked row is a hazard. A label-smoothed
cross entropy is inf as soon as one class of a row is `-inf`, so `inf_fills(..., any_entry=True)`
keeps every `-inf` fill, causal, top-k or column-selecting, and also follows the steps that keep
a `-inf` entry infinite on the way to a loss: a `log_softmax` of the filled logits, a temperature
(`logits / t`, `logits * scale`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Set

import libcst as cst

from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.syntax import code_key, number_value, strip_parens, unwrap_casts
from torchnumlint.rules.calls import is_literal, make_op, match_call
from torchnumlint.rules.value_steps import selection_of
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

_TENSOR_KW = ("out", "dtype", "layout", "device", "requires_grad", "pin_memory", "memory_format")

MASKED_FILL = make_op("masked_fill", {"torch.masked_fill"}, "masked_fill", ("mask", "value"))
MASKED_FILL_ = make_op("masked_fill_", set(), "masked_fill_", ("mask", "value"))
WHERE = make_op("where", {"torch.where"}, None, ("input", "other"), input_kw="condition")
FULL = make_op("full", {"torch.full"}, None, ("fill_value",) + _TENSOR_KW, input_kw="size")
FULL_LIKE = make_op("full_like", {"torch.full_like"}, None, ("fill_value",) + _TENSOR_KW)
TRIU = make_op("triu", {"torch.triu"}, "triu", ("diagonal",))
TRIL = make_op("tril", {"torch.tril"}, "tril", ("diagonal",))
ADD = make_op("add", {"torch.add"}, None, ("other", "alpha"))
ONES = frozenset({"torch.ones", "torch.ones_like"})
LOGICAL_NOT = make_op("logical_not", {"torch.logical_not"}, "logical_not")

_INF_NAMES = frozenset({"math.inf", "torch.inf", "numpy.inf", "np.inf"})


# ---------------------------------------------------------------------------------------------
# -inf


def _string(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        try:
            value = ast.literal_eval(expr.value)
        except (ValueError, SyntaxError):  # pragma: no cover - the parser already checked it
            return None
        return value.strip().lower() if isinstance(value, str) else None
    return None


def _float_of(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[str]:
    """The string of `float("...")` (the builtin, not shadowed by an import)."""
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value == "float"
        and ctx.qualname(expr.func) is None
        and len(expr.args) == 1
    ):
        return _string(expr.args[0].value)
    return None


def _sign_of_inf(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> int:
    """+1 for `inf`, -1 for `-inf` (through names bound once), 0 for anything else."""
    if depth > 6:
        return 0
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = _sign_of_inf(ctx, expr.expression, depth + 1)
        return -inner if isinstance(expr.operator, cst.Minus) else inner
    text = _float_of(ctx, expr)
    if text is not None:
        if text.lstrip("+") in ("inf", "infinity"):
            return 1
        if text in ("-inf", "-infinity"):
            return -1
        return 0
    if isinstance(expr, cst.Attribute) and ctx.qualname(expr) in _INF_NAMES:
        return 1
    if isinstance(expr, (cst.Name, cst.Attribute)):
        binding = ctx.binding(expr)
        if binding is not None and binding.value is not None:
            return _sign_of_inf(ctx, binding.value, depth + 1)
    return 0


def is_neg_inf(ctx: "FileContext", expr: Optional[cst.BaseExpression]) -> bool:
    """`expr` is -inf: `float("-inf")`, `-float("inf")`, `-math.inf`, `-torch.inf`, `-np.inf`, or
    a name or attribute bound once to one."""
    return expr is not None and _sign_of_inf(ctx, expr) == -1


# ---------------------------------------------------------------------------------------------
# Causal masks


def _diagonal(match, default: int) -> Optional[int]:
    """The `diagonal` of a triu/tril, when it is a literal (or `offset + k` with a literal k, the
    key-value cache's `start_pos + 1`, an offset that counts positions and is never negative; or
    the difference of the key and query lengths, read as its least value, 0)."""
    value = match.arg("diagonal")
    if value is None:
        return default
    number = number_value(value)
    if number is not None:
        return int(number)
    value = strip_parens(value)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        right = number_value(value.right)
        if right is not None and isinstance(strip_parens(value.left), (cst.Name, cst.Attribute)):
            return int(right)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract):
        # `s_k - s_q`, `k.size(-2) - q.size(-2)`: the queries are the last of the keys (a key-value
        # cache, the bottom-right causal mask), so the offset counts cached positions: never negative
        if all(_length(strip_parens(side)) for side in (value.left, value.right)):
            return 0
    return None


def _length(expr: cst.BaseExpression) -> bool:
    """A sequence length as code writes it: a name, an attribute, `x.size(d)`, `x.shape[d]`."""
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value == "size"
    return isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"


def _unwrapped(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    """Through names, casts (`.bool()`), reshapes and slices, and a registered buffer."""
    for _ in range(4):
        expr = unwrap_casts(ctx, expr)
        buffer = registered_buffer(ctx, expr)
        if buffer is None:
            return expr
        expr = buffer
    return expr


def _ones(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    expr = _unwrapped(ctx, expr)
    return isinstance(expr, cst.Call) and ctx.qualname(expr.func) in ONES


def _negation(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` for `~x`, `x == 0`, `x == False`, `x.logical_not()`, `torch.logical_not(x)`."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.BitInvert, cst.Not)):
        return expr.expression
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if isinstance(target.operator, cst.Equal) and (number_value(target.comparator) == 0 or is_literal(target.comparator, "False")):
            return expr.left
    match = match_call(ctx.imports, expr, LOGICAL_NOT)
    return match.input if match is not None else None


def causal_mask(ctx: "FileContext", mask: cst.BaseExpression, depth: int = 0) -> bool:
    """`mask` (True where masked) is strictly causal: it never masks column 0 (see the module)."""
    if depth > 4:
        return False
    value = _unwrapped(ctx, mask)
    inner = _negation(ctx, value)
    if inner is not None:
        return causal_keep(ctx, inner, depth + 1)
    triu = match_call(ctx.imports, value, TRIU)
    if triu is not None:
        diagonal = _diagonal(triu, 0)
        return diagonal is not None and diagonal >= 1 and _ones(ctx, triu.input)
    return False


def causal_keep(ctx: "FileContext", keep: cst.BaseExpression, depth: int = 0) -> bool:
    """`keep` (True where attended) keeps the diagonal and everything below it."""
    if depth > 4:
        return False
    value = _unwrapped(ctx, keep)
    inner = _negation(ctx, value)
    if inner is not None:
        return causal_mask(ctx, inner, depth + 1)
    tril = match_call(ctx.imports, value, TRIL)
    if tril is not None:
        diagonal = _diagonal(tril, 0)
        return diagonal is not None and diagonal >= 0 and _ones(ctx, tril.input)
    return False


def masks_first_row(ctx: "FileContext", mask: cst.BaseExpression) -> bool:
    """`mask` (True where masked) covers the whole first row, whatever the shapes: `triu(ones)`
    with a literal diagonal <= 0 (row 0 masks column 0 onwards), or the negation of a kept
    `tril(ones)` with a literal diagonal < 0 (row 0 keeps nothing)."""
    value = _unwrapped(ctx, mask)
    inner = _negation(ctx, value)
    if inner is not None:
        tril = match_call(ctx.imports, _unwrapped(ctx, inner), TRIL)
        diagonal = _literal_diagonal(tril) if tril is not None else None
        return tril is not None and diagonal is not None and diagonal < 0 and _ones(ctx, tril.input)
    triu = match_call(ctx.imports, value, TRIU)
    diagonal = _literal_diagonal(triu) if triu is not None else None
    return triu is not None and diagonal is not None and diagonal <= 0 and _ones(ctx, triu.input)


def _literal_diagonal(match) -> Optional[int]:
    """The `diagonal` of a triu/tril when it is written as a number (0 when not given)."""
    value = match.arg("diagonal")
    if value is None:
        return 0
    number = number_value(value)
    return int(number) if number is not None else None


def registered_buffer(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """For `self.name`, the value of `self.register_buffer("name", value)` in the enclosing class."""
    expr = strip_parens(expr)
    if not (isinstance(expr, cst.Attribute) and is_literal(expr.value, "self")):
        return None
    cls = ctx.enclosing(cst.ClassDef)
    if cls is None:
        return None
    buffers = ctx.per_file(f"masking-buffers-{id(cls)}", lambda _: _buffers(cls))
    return buffers.get(expr.attr.value)


def _buffers(cls: cst.ClassDef) -> Dict[str, cst.BaseExpression]:
    found: Dict[str, List[cst.BaseExpression]] = {}

    class _Calls(Visitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "register_buffer"
                and is_literal(func.value, "self")
                and len(node.args) >= 2
            ):
                name = node.args[0].value
                if isinstance(name, cst.SimpleString):
                    found.setdefault(ast.literal_eval(name.value), []).append(node.args[1].value)

    _Calls().walk(cls)
    return {name: values[0] for name, values in found.items() if len(values) == 1}


# ---------------------------------------------------------------------------------------------
# Fills


@dataclass(frozen=True)
class InfFill:
    """One `-inf` fill that reaches a use.

    `node` is what is reported (the call or the index assignment), `value` the `-inf` argument a
    fix may replace, `target` the tensor filled (whose dtype `torch.finfo` takes; None where it
    is not written), `form` how it is written, `additive` whether it reaches the use through an
    addition (an additive mask), `mask` what selects the filled entries (the condition of a
    `torch.where`; None for `torch.full`, which fills every entry), or with `kept` the entries
    kept (`torch.log(keep)` fills where `keep` is 0)."""

    node: cst.CSTNode
    value: cst.BaseExpression
    target: Optional[cst.BaseExpression]
    form: str
    additive: bool
    mask: Optional[cst.BaseExpression] = None
    kept: bool = False  # `mask` is True where entries are kept (the log of a 0/1 mask), not filled


@dataclass
class _Scan:
    """One function's in-place fills through `.data` (which bind no name) and its zero fills,
    with the walk order of every call and assignment."""

    order: Dict[int, int] = field(default_factory=dict)
    data_fills: Dict[str, List[tuple]] = field(default_factory=dict)  # key -> (order, node, receiver, value, mask, covers)
    zero_fills: Dict[str, List[int]] = field(default_factory=dict)  # key -> orders


def _scan(ctx: "FileContext", scope: cst.CSTNode) -> _Scan:
    scan = _Scan()
    imports = ctx.imports

    def key(expr: cst.BaseExpression) -> str:
        return code_key(ctx, expr)

    class _Walk(Visitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            scan.order[id(node)] = len(scan.order)
            if node is not scope and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.Call):
                self._call(node)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1:
                self._index(node, node.targets[0].target, node.value)
            return True

        def _call(self, node: cst.Call) -> None:
            fill = match_call(imports, node, MASKED_FILL, MASKED_FILL_)
            if fill is not None:
                value = fill.arg("value")
                receiver = strip_parens(fill.input)
                if value is not None and number_value(value) == 0:
                    scan.zero_fills.setdefault(key(receiver), []).append(scan.order[id(node)])
                elif (
                    fill.op is MASKED_FILL_
                    and isinstance(receiver, cst.Attribute)
                    and receiver.attr.value == "data"
                    and is_neg_inf(ctx, value)
                ):
                    mask = fill.arg("mask")
                    scan.data_fills.setdefault(key(receiver.value), []).append(
                        (scan.order[id(node)], node, receiver, value, mask, _row_mask(ctx, receiver, mask))
                    )
                return
            where = match_call(imports, node, WHERE)
            if where is not None:
                for zero, kept in ((where.arg("input"), where.arg("other")), (where.arg("other"), where.arg("input"))):
                    if zero is not None and kept is not None and number_value(zero) == 0:
                        scan.zero_fills.setdefault(key(kept), []).append(scan.order[id(node)])

        def _index(self, node: cst.Assign, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
            if not isinstance(target, cst.Subscript):
                return
            base = strip_parens(target.value)
            if number_value(value) == 0:
                scan.zero_fills.setdefault(key(base), []).append(scan.order[id(node)])
            elif isinstance(base, cst.Attribute) and base.attr.value == "data" and is_neg_inf(ctx, value):
                mask = _element_mask(target)
                scan.data_fills.setdefault(key(base.value), []).append(
                    (scan.order[id(node)], node, base, value, mask, _row_mask(ctx, base, mask))
                )

    _Walk().walk(scope)
    return scan


def scan_of(ctx: "FileContext") -> _Scan:
    return ctx.per_scope("masking-scan", lambda scope: _scan(ctx, scope))


_RANKINGS = frozenset({"topk", "sort", "kthvalue", "max", "amax", "quantile", "nanquantile"})


def _ranked(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`expr` comes from a ranking of a tensor (`topk`, `sort`, `kthvalue`, `max`, `quantile`),
    through indexing and names (`v, _ = torch.topk(x, k)`)."""
    expr = strip_parens(expr)
    while isinstance(expr, (cst.Subscript, cst.Attribute)) and not isinstance(expr, cst.Name):
        if isinstance(expr, cst.Attribute) and expr.attr.value not in ("values",):
            break
        expr = strip_parens(expr.value)
    if isinstance(expr, cst.Call):
        func = expr.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (ctx.qualname(func) or "").rsplit(".", 1)[-1]
        return name in _RANKINGS
    if depth < 4 and isinstance(expr, cst.Name):
        binding = ctx.binding(expr)
        if binding is not None:
            value = binding.value if binding.value is not None else (binding.unpacked or (None,))[0]
            return value is not None and _ranked(ctx, value, depth + 1)
    return False


def keeps_row_maximum(ctx: "FileContext", filled: Optional[cst.BaseExpression], mask: Optional[cst.BaseExpression]) -> bool:
    """The top-k filter: `mask` is `x < t` (or `t > x`) of the filled tensor `x` against a ranking
    of it (`t = x.topk(k).values[..., -1:]`): the entries at or above `t`, the row's maximum among
    them, are never masked."""
    if filled is None or mask is None:
        return False
    mask = strip_parens(unwrap_casts(ctx, mask))
    if not (isinstance(mask, cst.Comparison) and len(mask.comparisons) == 1):
        return False
    op, right = mask.comparisons[0].operator, mask.comparisons[0].comparator
    if isinstance(op, (cst.LessThan, cst.LessThanEqual)):
        side, threshold = mask.left, right
    elif isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)):
        side, threshold = right, mask.left
    else:
        return False
    return code_key(ctx, side) == code_key(ctx, filled) and _ranked(ctx, threshold)


def _row_mask(ctx: "FileContext", filled: Optional[cst.BaseExpression], mask: Optional[cst.BaseExpression]) -> bool:
    """Whether a fill by `mask` may cover a whole row: not a causal mask, not a top-k filter."""
    return mask is not None and not causal_mask(ctx, mask) and not keeps_row_maximum(ctx, filled, mask)


def _element_mask(target: cst.Subscript) -> Optional[cst.BaseExpression]:
    """The mask of `x[m] = v`: one index that is no slice. `x[:, ids]` selects columns (a
    vocabulary's suppressed tokens), which never are a whole row."""
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    index = strip_parens(target.slice[0].slice.value)
    if isinstance(index, (cst.Tuple, cst.List, cst.Integer)):
        return None
    return index


def _inplace_fill(ctx: "FileContext", node: cst.CSTNode, name: cst.BaseExpression, additive: bool, any_entry: bool) -> Optional[InfFill]:
    """The fill a binding with no value stands for: `name.masked_fill_(m, -inf)` or
    `name[m] = -inf` (how the scope table records an in-place change)."""
    fill = match_call(ctx.imports, node, MASKED_FILL_)
    value = fill.arg("value") if fill is not None else None
    if fill is not None and value is not None and is_neg_inf(ctx, value) and (any_entry or _row_mask(ctx, fill.input, fill.arg("mask"))):
        return InfFill(node, value, name, "masked_fill_", additive, fill.arg("mask"))
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Subscript):
        target = node.targets[0].target
        if is_neg_inf(ctx, node.value) and (any_entry or _row_mask(ctx, target.value, _element_mask(target))):
            return InfFill(node, node.value, name, "index", additive, _element_mask(target))
    return None


def inf_fills(ctx: "FileContext", expr: cst.BaseExpression, use: cst.CSTNode, any_entry: bool = False) -> List[InfFill]:
    """Every `-inf` fill that `expr`, read at `use` (the node being visited), may hold, whose mask
    can cover a whole row (causal masks left out); with `any_entry`, every `-inf` fill, and
    through the steps that keep it infinite (a `log_softmax`, a temperature: see the module)."""
    found: List[InfFill] = []
    _Walk(ctx, use, any_entry, found).walk(expr, False, 0)
    return found


# Reductions of a mask over a row, and its negation (not in the shared op table: only here).
_ANY = make_op("any", {"torch.any"}, "any", ("dim", "keepdim"))
_ALL = make_op("all", {"torch.all"}, "all", ("dim", "keepdim"))
_LOGICAL_NOT = make_op("logical_not", {"torch.logical_not"}, "logical_not", ())


def refills_empty_rows(ctx: "FileContext", refill: cst.BaseExpression, masked: Optional[cst.BaseExpression]) -> bool:
    """Whether `refill` (the mask of a later fill with a number) selects every row in which
    `masked` (the mask of a `-inf` fill) masks every entry: `~keep.any(d)` or `keep.sum(d) == 0`
    for `masked` = `~keep` (`keep == 0`, `keep.logical_not()`), or `masked.all(d)`; through
    names, casts and `[..., None]` / `unsqueeze`. Such rows are re-filled before use (measured,
    torch 2.13 CPU: the softmax is uniform there and every gradient finite)."""
    if masked is None:
        return False
    refill = _plain_mask(ctx, refill)
    kept: Optional[cst.BaseExpression] = None
    whole = match_call(ctx.imports, refill, _ALL)  # `masked.all(d)`: the rows masked whole
    if whole is not None:
        return code_key(ctx, _plain_mask(ctx, whole.input)) == code_key(ctx, _plain_mask(ctx, masked))
    if isinstance(refill, cst.Comparison) and len(refill.comparisons) == 1 and isinstance(refill.comparisons[0].operator, cst.Equal):
        counted = match_call(ctx.imports, strip_parens(ctx.resolve(refill.left)), "sum", "count_nonzero")
        if counted is not None and number_value(strip_parens(refill.comparisons[0].comparator)) == 0:
            kept = counted.input  # `keep.sum(d) == 0`: the rows where keep has nothing
    negated = _negated(ctx, refill) if kept is None else None
    if negated is not None:  # `~keep.any(d)`
        reduced = match_call(ctx.imports, _plain_mask(ctx, negated), _ANY)
        kept = reduced.input if reduced is not None else None
    if kept is None:
        return False
    inverse = _negated(ctx, _plain_mask(ctx, masked))
    return inverse is not None and code_key(ctx, _plain_mask(ctx, inverse)) == code_key(ctx, _plain_mask(ctx, kept))


def _plain_mask(ctx: "FileContext", mask: cst.BaseExpression) -> cst.BaseExpression:
    """`mask` past names bound once, parentheses, casts, `[..., None]` and reshapes."""
    return unwrap_casts(ctx, strip_parens(mask))


def _negated(ctx: "FileContext", mask: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`m` of `~m`, `m.logical_not()`, `torch.logical_not(m)`, `m == 0`, `m == False`; else None."""
    if isinstance(mask, cst.UnaryOperation) and isinstance(mask.operator, (cst.BitInvert, cst.Not)):
        return mask.expression
    negation = match_call(ctx.imports, mask, _LOGICAL_NOT)
    if negation is not None:
        return negation.input
    if isinstance(mask, cst.Comparison) and len(mask.comparisons) == 1 and isinstance(mask.comparisons[0].operator, cst.Equal):
        other = strip_parens(mask.comparisons[0].comparator)
        if number_value(other) == 0 or is_literal(other, "False"):
            return mask.left
    return None


def _kept_infinite(imports, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """What `expr` keeps an infinite entry of: the input of a `log_softmax` (-inf stays -inf),
    the scaled side of `x / t` or `x * t` (a temperature: -inf stays infinite)."""
    log_softmax = match_call(imports, expr, "log_softmax")
    if log_softmax is not None:
        return log_softmax.input
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return expr.left
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return expr.left if _scalar_like(expr.right) else expr.right if _scalar_like(expr.left) else None
    return None


def _scalar_like(expr: cst.BaseExpression) -> bool:
    """A number, or a name or attribute (`self.logit_scale`, `temperature`): a scale factor."""
    expr = strip_parens(expr)
    return number_value(expr) is not None or isinstance(expr, (cst.Name, cst.Attribute))


class _Walk:
    """One backward search from a use: what it is looking for (`any_entry`), what it has seen
    and found."""

    def __init__(self, ctx: "FileContext", use: cst.CSTNode, any_entry: bool, found: List[InfFill]) -> None:
        self.ctx, self.use, self.any_entry, self.found = ctx, use, any_entry, found
        self.seen: Set[int] = set()

    def covers(self, filled: Optional[cst.BaseExpression], mask: Optional[cst.BaseExpression]) -> bool:
        return self.any_entry or _row_mask(self.ctx, filled, mask)

    def walk(self, expr: cst.BaseExpression, additive: bool, depth: int) -> None:
        if depth > 8 or id(expr) in self.seen:
            return
        self.seen.add(id(expr))
        ctx, imports, found = self.ctx, self.ctx.imports, self.found
        expr = strip_parens(selection_of(imports, strip_parens(expr)))
        if isinstance(expr, (cst.Name, cst.Attribute)):
            self.through_name(expr, additive, depth)
            return
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            for side in (expr.left, expr.right):
                self.walk(side, True, depth + 1)
            return
        add = match_call(imports, expr, ADD)
        other = add.arg("other") if add is not None else None
        if add is not None and other is not None and add.arg("alpha") is None:
            for side in (add.input, other):
                self.walk(side, True, depth + 1)
            return
        fill = match_call(imports, expr, MASKED_FILL, MASKED_FILL_)
        if fill is not None:
            value = fill.arg("value")
            if value is not None and is_neg_inf(ctx, value):
                if self.covers(fill.input, fill.arg("mask")):
                    found.append(InfFill(expr, value, fill.input, fill.op.name, additive, fill.arg("mask")))
                return
            before = len(found)
            self.walk(fill.input, additive, depth + 1)
            mask = fill.arg("mask")
            if mask is not None and not self.any_entry and value is not None and number_value(value) is not None:
                # `s.masked_fill(~keep.any(-1, keepdim=True), 0.0)`: the rows left with no entry are
                # re-filled with a number before the softmax reads them
                found[before:] = [one for one in found[before:] if not refills_empty_rows(ctx, mask, one.mask)]
            return
        where = match_call(imports, expr, WHERE)
        if where is not None:
            self.where(where, additive)
            return
        full = match_call(imports, expr, FULL, FULL_LIKE)
        if full is not None:
            value = full.arg("fill_value")
            if value is not None and is_neg_inf(ctx, value):
                found.append(InfFill(expr, value, None, full.op.name, True))
            return
        log = match_call(imports, expr, "log")
        if log is not None:
            if additive and log.fully_known and is_mask(ctx, log.input) and (self.any_entry or not causal_keep(ctx, log.input)):
                # `scores + keep.log()`: 0 where kept, -inf elsewhere; `keep` is what selects
                found.append(InfFill(expr, expr, None, "log", True, log.input, kept=True))
            return
        triu = match_call(imports, expr, TRIU)
        if triu is not None:
            diagonal = _diagonal(triu, 0)
            if self.any_entry or diagonal is None or diagonal < 1:
                self.walk(triu.input, additive, depth + 1)
            # with diagonal >= 1 the diagonal is never -inf: no row is covered
            return
        if self.any_entry:
            kept = _kept_infinite(imports, expr)
            if kept is not None:
                self.walk(kept, additive, depth + 1)

    def where(self, where, additive: bool) -> None:
        condition, chosen, other = where.input, where.arg("input"), where.arg("other")
        if chosen is None or other is None:
            return
        if is_neg_inf(self.ctx, chosen) and (self.any_entry or not causal_mask(self.ctx, condition)):
            self.found.append(InfFill(where.call, chosen, other, "where", additive, condition))
        elif is_neg_inf(self.ctx, other) and (self.any_entry or not causal_keep(self.ctx, condition)):
            self.found.append(InfFill(where.call, other, chosen, "where", additive, condition))

    def through_name(self, expr: cst.BaseExpression, additive: bool, depth: int) -> None:
        ctx, use = self.ctx, self.use
        binding = ctx.binding(expr)
        definitions = [binding] if binding is not None else (ctx.reaching(expr) or [])
        for definition in definitions:
            if definition.value is not None:
                self.walk(definition.value, additive, depth + 1)
            else:
                fill = _inplace_fill(ctx, definition.node, expr, additive, self.any_entry)
                if fill is not None:
                    self.found.append(fill)
        scan = scan_of(ctx)
        at = scan.order.get(id(use))
        for order, node, receiver, value, mask, covers in scan.data_fills.get(code_key(ctx, expr), ()):
            if (covers or self.any_entry) and at is not None and order < at and not ctx.rebound_between(receiver.value, use):
                self.found.append(InfFill(node, value, receiver.value, "data", additive, mask))


def rezeroed(ctx: "FileContext", call: cst.CSTNode) -> bool:
    """Whether the output of `call` (the node being visited) is set to 0 where masked:
    `p.masked_fill(m, 0)`, `torch.where(m, 0, p)` on the call itself, or on the one name it is
    assigned to, later in the function (`p = s.softmax(-1)` ... `p = p.masked_fill(~keep, 0.0)`)."""
    stack = ctx.stack
    parent = stack[-2] if len(stack) > 1 else None
    grand = stack[-3] if len(stack) > 2 else None
    if isinstance(parent, cst.Attribute) and isinstance(grand, cst.Call) and grand.func is parent:
        fill = match_call(ctx.imports, grand, MASKED_FILL, MASKED_FILL_)
        value = fill.arg("value") if fill is not None else None
        return value is not None and number_value(value) == 0
    if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
        where = match_call(ctx.imports, grand, WHERE)
        if where is not None:
            branches = [where.arg("input"), where.arg("other")]
            return any(b is not None and number_value(b) == 0 for b in branches)
    if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, (cst.Name, cst.Attribute)):
            scan = scan_of(ctx)
            at = scan.order.get(id(call), -1)
            return any(order > at for order in scan.zero_fills.get(code_key(ctx, target), ()))
    return False
