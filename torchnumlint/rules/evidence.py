"""Evidence before a report: what a value is (a torch tensor, numpy, a Python number), whether a
gradient can flow through it, and why it can reach 0.

A division by a norm or a root of a variance is a hazard only for inputs that make it 0. Real code
divides by thousands of sums and norms that never are (a Gaussian kernel's sum, the std of a
network's output, the norm of a learned embedding), so a division or root rule reports by default
only with evidence that its argument reaches the hazard, and names that evidence in its message.
Without evidence a finding is "possible": reported only in strict mode (`--strict`).

Values are followed through names (every assignment that may reach them, `ways.ways`),
arithmetic, indexing and the shape-only and cast methods that keep zeros (`view`, `reshape`,
`unsqueeze`, `float()`...). What a value is, and whether it is data or bounded, must hold of every
way it comes; a reason to reach 0 needs only one way that a path can take and that no guard
covers, and the message names that way (`ways.way_note`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules import mask_origin, vocabulary
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.number_kinds import is_python_number
from torchnumlint.rules.syntax import number_value, same_code, strip_parens
from torchnumlint.rules.ways import branches, every_way, unless_asking, way_note, ways
from torchnumlint.rules.gradients import is_module_class
from torchnumlint.rules.bindings import all_params, Binding
from torchnumlint.rules.calls import match_call

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# Methods that keep the zeros (and the origin) of their receiver.
SHAPE_METHODS = vocabulary.SAME_VALUES | vocabulary.SELECTIONS | vocabulary.REPEATS
# Shape-only steps a numpy array has as methods too (`a.reshape(...)`, `a.T`): no sign of torch.
_NUMPY_SHAPE_METHODS = frozenset({"reshape", "squeeze", "transpose", "flatten", "swapaxes"})
# Methods that only a torch tensor has (numpy arrays and Python numbers do not): every other
# shape-only step (`view_as`, `movedim`, `unflatten`, ...), and these.
_TENSOR_ONLY_METHODS = (vocabulary.SHAPE_ONLY - _NUMPY_SHAPE_METHODS) | frozenset(
    {
        "norm",
        "detach",
        "float",
        "half",
        "bfloat16",
        "cuda",
        "to",
        "type_as",
        "clamp",
        "clamp_min",
        "masked_fill",
        "softmax",
        "log_softmax",
        "sigmoid",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_tensor",
        "size",
        "dim",
        "numel",
        "masked_select",
        "index_select",
        "narrow",
        "requires_grad_",
        "pow",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "abs",
        "relu",
        "square",
    }
)
_NOT_TENSOR_METHODS = frozenset({"numpy", "tolist", "item"})
_TORCH_KEYWORDS = frozenset({"dim", "keepdim"})
_NUMPY_KEYWORDS = frozenset({"axis", "keepdims", "ddof"})
_NUMBER_ANNOTATIONS = frozenset({"int", "float", "bool", "complex"})

# Values that carry no gradient whatever their inputs: indices, random draws, data, comparisons.
_NO_GRAD_FUNCTIONS = frozenset(
    {
        "torch.arange",
        "torch.randperm",
        "torch.randint",
        "torch.randint_like",
        "torch.nonzero",
        "torch.argmax",
        "torch.argmin",
        "torch.argsort",
        "torch.bincount",
        "torch.unique",
        "torch.searchsorted",
        "torch.bucketize",
        "torch.rand",
        "torch.randn",
        "torch.rand_like",
        "torch.randn_like",
        "torch.normal",
        "torch.multinomial",
        "torch.zeros",
        "torch.ones",
        "torch.full",
        "torch.empty",
        "torch.eye",
        "torch.linspace",
        "torch.logspace",
        "torch.zeros_like",
        "torch.ones_like",
        "torch.full_like",
        "torch.empty_like",
        "torch.tensor",
        "torch.as_tensor",
        "torch.from_numpy",
        "torch.Tensor",
        "torch.FloatTensor",
        "torch.LongTensor",
        "torch.isfinite",
        "torch.isnan",
        "torch.isinf",
        "torch.count_nonzero",
    }
)
_NO_GRAD_TENSOR_METHODS = frozenset(
    {
        "detach",
        "item",
        "numpy",
        "tolist",
        "long",
        "int",
        "bool",
        "argmax",
        "argmin",
        "argsort",
        "nonzero",
        "size",
        "numel",
        "dim",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "isfinite",
        "isnan",
        "isinf",
        "count_nonzero",
    }
)
_MAX_LEAVES = 24
# What a finding without evidence says, in strict mode.
STRICT_WHY = "in some cases (strict mode: no evidence found that it does here)"


def _param_of(binding: Optional[Binding]) -> Optional[cst.Param]:
    return binding.node if binding is not None and isinstance(binding.node, cst.Param) else None


def _annotation(param: cst.Param) -> str:
    if param.annotation is None:
        return ""
    ann = param.annotation.annotation
    while isinstance(ann, cst.Subscript):  # Optional[Tensor]
        ann = ann.slice[0].slice.value if isinstance(ann.slice[0].slice, cst.Index) else ann.value
    if isinstance(ann, cst.Attribute):
        return ann.attr.value
    if isinstance(ann, cst.Name):
        return ann.value
    if isinstance(ann, cst.SimpleString) and isinstance(ann.evaluated_value, str):
        return ann.evaluated_value.rsplit(".", 1)[-1]
    return ""


def _function_of(ctx: "FileContext", param: cst.Param) -> Optional[cst.FunctionDef]:
    for node in reversed(ctx.stack):
        if isinstance(node, cst.FunctionDef) and any(p is param for p in all_params(node.params)):
            return node
    return None


def in_module_class(ctx: "FileContext") -> bool:
    """Inside a class that can hold parameters (`gradients.is_module_class`)."""
    cls = ctx.enclosing(cst.ClassDef)
    return cls is not None and is_module_class(cls)


def _method_of(ctx: "FileContext", func: cst.FunctionDef) -> Optional[cst.ClassDef]:
    """The class whose body defines `func` directly (not a function nested in a method)."""
    stack = ctx.stack
    at = next((i for i, node in enumerate(stack) if node is func), -1)
    above = stack[at - 2] if at >= 2 else None
    return above if isinstance(above, cst.ClassDef) else None


def is_forward_input(ctx: "FileContext", param: cst.Param) -> bool:
    """A parameter of a module's `forward` (not `self`): the data the model is run on."""
    func = _function_of(ctx, param)
    if func is None or func.name.value != "forward" or param.name.value == "self":
        return False
    cls = _method_of(ctx, func)
    return cls is not None and is_module_class(cls)


# ---------------------------------------------------------------------------------------------
# What a value is


def value_kind(ctx: "FileContext", expr: cst.CSTNode, depth: int = 0) -> Optional[str]:
    """ "torch", "numpy" or "python" when the code says which, else None.

    torch: a `torch.*` call, a method only tensors have (`.norm`, `.float()`, `.detach()`), `dim=`
    or `keepdim=` arguments, a parameter annotated `Tensor` or given to a module's `forward`, an
    attribute or submodule output of an `nn.Module`. numpy: an `np.*` call, `.numpy()`, `axis=`.
    python: numbers, shapes, `len`, `math.*`, `.item()`, `.tolist()`.

    Answers are kept per node for the file: a name rebound many times (`h = h * h + h`) would
    otherwise be asked about again down every path."""
    if depth > 8:
        return None
    known: Dict[int, Tuple[cst.CSTNode, Optional[str]]] = ctx.per_file("value kinds", lambda _: {})
    entry = known.get(id(expr))
    if entry is None:  # the node is kept with its answer, so that its id is not reused meanwhile
        entry = known[id(expr)] = (expr, _value_kind(ctx, expr, depth))
    return entry[1]


def _value_kind(ctx: "FileContext", expr: cst.CSTNode, depth: int) -> Optional[str]:
    expr = strip_parens(expr)  # type: ignore[arg-type]  # strip_parens leaves any other node as it is
    if isinstance(expr, cst.BaseExpression) and is_python_number(ctx, expr):
        return "python"
    if isinstance(expr, cst.Param):
        ann = _annotation(expr)
        if ann == "Tensor" or ann == "FloatTensor" or ann == "LongTensor":
            return "torch"
        if ann == "ndarray":
            return "numpy"
        if ann in _NUMBER_ANNOTATIONS or (expr.default is not None and number_value(expr.default) is not None):
            return "python"
        return "torch" if is_forward_input(ctx, expr) else None
    found = ways(ctx, expr)
    if found is not None:  # a name, a conditional: the kind every way gives, when they agree
        kinds = {value_kind(ctx, way.value, depth + 1) if isinstance(way.value, (cst.BaseExpression, cst.Param)) else None for way in found}
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(expr, cst.Attribute):
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return "torch" if in_module_class(ctx) and expr.attr.value in ("weight", "bias") else None
        return None
    if isinstance(expr, cst.Subscript):
        return value_kind(ctx, expr.value, depth + 1)
    if isinstance(expr, cst.UnaryOperation):
        return value_kind(ctx, expr.expression, depth + 1)
    if isinstance(expr, (cst.BinaryOperation, cst.Comparison)):
        sides = (expr.left, expr.right) if isinstance(expr, cst.BinaryOperation) else (expr.left, *(c.comparator for c in expr.comparisons))
        kinds = {value_kind(ctx, side, depth + 1) for side in sides}
        for kind in ("torch", "numpy"):
            if kind in kinds:
                return kind
        return "python" if kinds == {"python"} else None
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        if qual is not None:
            if qual.startswith("torch."):
                return "torch"
            if qual.startswith(("numpy.", "scipy.")):
                return "numpy"
            if qual.startswith(("math.", "statistics.")):
                return "python"
            return None
        keywords = {a.keyword.value for a in expr.args if a.keyword is not None}
        if keywords & _TORCH_KEYWORDS:
            return "torch"
        if keywords & _NUMPY_KEYWORDS:
            return "numpy"
        func = expr.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _NOT_TENSOR_METHODS:
                return "numpy" if method == "numpy" else "python"
            if method in _TENSOR_ONLY_METHODS:
                return "torch"
            if isinstance(func.value, cst.Name) and func.value.value == "self":
                return "torch" if in_module_class(ctx) else None  # a submodule's output
            return value_kind(ctx, func.value, depth + 1)
    return None


def is_torch_value(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    return value_kind(ctx, expr) == "torch"


def is_not_torch(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Known to be numpy or a Python number: no torch rule applies, no torch-only fix fits."""
    return value_kind(ctx, expr) in ("numpy", "python")


# ---------------------------------------------------------------------------------------------
# Whether a gradient can flow


def may_carry_grad(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """False when every value `expr` is computed from carries no gradient: numbers, numpy, indices,
    random draws, data tensors, detached values, comparisons, and the attributes of a class that
    holds no parameters (a scheduler's sigmas). Anything unknown may carry one."""
    todo: List[cst.BaseExpression] = [expr]
    seen = 0
    while todo:
        seen += 1
        if seen > _MAX_LEAVES:
            return True
        node = strip_parens(todo.pop())
        if is_python_number(ctx, node) or isinstance(node, (cst.Comparison, cst.SimpleString)):
            continue
        found = ways(ctx, node) if isinstance(node, (cst.Name, cst.IfExp)) else None
        if isinstance(node, (cst.Name, cst.IfExp)) and found is None:
            return True
        if found is not None:  # every way it may come: one that carries a gradient is enough
            for way in found:
                binding, value = way.binding, way.value
                if binding is not None and binding.no_grad:
                    continue
                if isinstance(value, cst.Param):
                    if _annotation(value) in _NUMBER_ANNOTATIONS or (value.default is not None and number_value(value.default) is not None):
                        continue
                    return True
                if isinstance(value, cst.Assign):
                    todo.append(value.value)  # unpacked: `rows, cols = torch.where(mask)`
                elif isinstance(value, cst.BaseExpression):
                    todo.append(value)
                else:
                    return True
        elif isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                if in_module_class(ctx):
                    return True
                continue  # plain state of an object that holds no parameters
            if node.attr.value in ("data", "shape", "ndim", "dtype", "device"):
                continue
            return True
        elif isinstance(node, cst.Subscript):
            todo.append(node.value)
        elif isinstance(node, cst.UnaryOperation):
            todo.append(node.expression)
        elif isinstance(node, cst.BinaryOperation):
            todo.extend((node.left, node.right))
        elif isinstance(node, (cst.List, cst.Tuple)):
            todo.extend(e.value for e in node.elements)
        elif isinstance(node, cst.Call):
            qual = ctx.qualname(node.func)
            if qual == "torch.where" and len(node.args) == 1:
                continue  # the indices where a condition holds
            if qual is not None:
                if qual in _NO_GRAD_FUNCTIONS or qual.startswith(("numpy.", "math.")):
                    if not any(a.keyword is not None and a.keyword.value == "requires_grad" for a in node.args):
                        continue
                if not qual.startswith("torch."):
                    return True
                todo.extend(a.value for a in node.args if a.keyword is None)
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
                if func.attr.value in _NO_GRAD_TENSOR_METHODS:
                    continue
                if isinstance(func.value, cst.Name) and func.value.value == "self":
                    return True  # a method or submodule: its own parameters
                todo.append(func.value)
                todo.extend(a.value for a in node.args if a.keyword is None)
                continue
            return True
        else:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Why a value can be 0


def lineage(
    ctx: "FileContext",
    expr: cst.BaseExpression,
    step: Callable[[cst.BaseExpression], Optional[cst.BaseExpression]],
    limit: int = 8,
) -> Iterator[cst.BaseExpression]:
    """`expr`, then what it was made from, nearest first: a name's one assignment, and for
    anything else what `step` says (None: the line of descent ends). It ends at a name several
    assignments may give its value (`ways.branches`): a question of every way, or of some
    way, is then asked of each (`some_way`)."""
    for _ in range(limit):
        expr = strip_parens(expr)
        yield expr
        if isinstance(expr, cst.Name):
            found = ways(ctx, expr)
            following = found[0].value if found is not None and len(found) == 1 else None
            if not isinstance(following, cst.BaseExpression):
                return
        else:
            following = step(expr)
        if following is None:
            return
        expr = following


def some_way(ctx: "FileContext", expr: cst.BaseExpression, find: Callable[[cst.CSTNode], Optional[str]]) -> Optional[str]:
    """For a name several assignments may give its value, or a conditional expression: the
    reason `find` gives for the first of its values that no guard covers, naming that way (a
    guarded branch leaves the other's zero); None where none gives one, or `expr` has no
    several ways. A reason found further down already names its own way."""
    found = branches(ctx, expr)
    if found is None:
        return None
    for way in found:
        value = way.value
        if isinstance(value, cst.BaseExpression) and is_guarded(ctx, value):
            continue
        why = unless_asking(ctx, "some way", value, lambda: find(value), None)
        if why is not None:
            return why if isinstance(why, _Named) else _Named(why + way_note(ctx, way))
    return None


class _Named(str):
    """A reason that already names the way it holds on (a branch inside a branch names the
    innermost)."""


def _param_at(ctx: "FileContext", origin: cst.CSTNode) -> Optional[cst.Param]:
    """The parameter where a line of descent ends: a name bound only by it, or the parameter
    itself (one of several ways)."""
    if isinstance(origin, cst.Param):
        return origin
    return _param_of(ctx.binding(origin)) if isinstance(origin, cst.Name) else None


def _origins(ctx: "FileContext", expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """`expr` and what it was computed from through names and zero-keeping steps (shape-only
    methods, casts, indexing), nearest first."""

    def step(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        if isinstance(node, cst.Subscript):
            return node.value
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in SHAPE_METHODS
            and not ctx.imports.is_module_ref(node.func.value)
        ):
            return node.func.value
        return None

    return lineage(ctx, expr, step)


def _indexed_base(ctx: "FileContext", expr: cst.BaseExpression) -> Tuple[cst.BaseExpression, bool]:
    """(the tensor under indexing and unsqueezing, whether a new axis was added on the way):
    `x[:, None]` -> (x, True), `x.unsqueeze(1)` -> (x, True), `pos[i]` -> (pos, False)."""
    broadcast = False
    expr = strip_parens(expr)
    for _ in range(4):
        if isinstance(expr, cst.Subscript):
            broadcast |= any(
                isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Name) and e.slice.value.value == "None" for e in expr.slice
            )
            expr = strip_parens(expr.value)
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "unsqueeze":
            broadcast = True
            expr = strip_parens(expr.func.value)
        else:
            break
    return expr, broadcast


def difference_evidence(ctx: "FileContext", expr: cst.BaseExpression, strong: bool = False) -> Optional[str]:
    """Why a difference `a - b` reaches 0, or None when it is no difference or cannot be shown
    to: the pairwise differences of a tensor with itself (`x[:, None] - x[None]`) are 0 on the
    diagonal; a row minus its own mean is 0 for a constant row; two different values can
    coincide (a weak reason: `strong` leaves it out). Differences of one tensor at two index
    sets (`pos[i] - pos[j]` over the edges of a graph) are 0 only for self-pairs, which such
    code excludes. Of a name with several ways, the first of them that reaches 0."""
    if branches(ctx, expr) is not None:
        # a way that is no expression (a parameter, a loop target) is no difference
        return some_way(ctx, expr, lambda value: difference_evidence(ctx, value, strong) if isinstance(value, cst.BaseExpression) else None)
    if not (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Subtract)
        and not is_python_number(ctx, expr.left)
        and not is_python_number(ctx, expr.right)
    ):
        return None
    (left, left_new), (right, right_new) = _indexed_base(ctx, expr.left), _indexed_base(ctx, expr.right)
    if same_code(ctx, left, right) and (left is not strip_parens(expr.left) or right is not strip_parens(expr.right)):
        if left_new or right_new:
            return "on the diagonal of the pairwise differences of a tensor with itself"
        return None
    for origin in _origins(ctx, expr.right):
        mean = match_call(ctx.imports, origin, "mean")
        if mean is not None and same_code(ctx, mean.input, expr.left):
            return "for a constant row (a row minus its own mean)"
    return None if strong else "where the two sides of a difference coincide"


def is_bounded(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Clamped from both sides (`torch.clamp(c, -1 + eps, 1 - eps)`): `1 - c ** 2` stays above 0.
    Every way the value comes must be (`c = c.clamp(...)` after `c = cos(a, b)` is one way)."""
    return every_way(ctx, expr, "bounded", lambda value: _bounded(ctx, value))


def _bounded(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    clamp = match_call(ctx.imports, expr, "clamp", "clip") if isinstance(expr, cst.BaseExpression) else None
    return clamp is not None and clamp.given("min") and clamp.given("max")


def is_learned(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A parameter of the model: `self.<attr>` in a module, or an argument annotated
    `nn.Parameter`, on every way the value comes. Learned values are never all 0 (a randomly
    initialised weight)."""
    return every_way(ctx, expr, "learned", lambda value: _learned(ctx, value))


def _learned(ctx: "FileContext", value: cst.CSTNode) -> bool:
    if isinstance(value, cst.Param):
        return _annotation(value) == "Parameter"
    if not isinstance(value, cst.BaseExpression):
        return False
    for origin in _origins(ctx, value):
        if isinstance(origin, cst.Attribute) and isinstance(origin.value, cst.Name) and origin.value.value == "self":
            return in_module_class(ctx)
        if branches(ctx, origin) is not None:
            return is_learned(ctx, origin)
        param = _param_at(ctx, origin)
        if param is not None:
            return _annotation(param) == "Parameter"
    return False


def _mask_of(ctx: "FileContext", expr: cst.BaseExpression, selected: bool = True) -> Optional[cst.BaseExpression]:
    """The mask that zeroes values (`x * mask`, `x.masked_fill(m, 0)`), or, with `selected`, that
    chooses them (`x[mask]`, `x.masked_select(m)`: empty when it selects nothing); None when
    `expr` is neither. A selection keeps whole rows, so it is no reason for a row to be zero
    (`v[mask] / v[mask].norm(dim=1)`, where the mask drops the self-loops whose vectors are zero,
    is the guard, not the hazard)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return next((side for side in (expr.left, expr.right) if is_mask(ctx, side)), None)
    if isinstance(expr, cst.Subscript):
        if not selected:
            return None
        return next((e.slice.value for e in expr.slice if isinstance(e.slice, cst.Index) and is_mask(ctx, e.slice.value)), None)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.args:
        zeroing = ("masked_fill", "masked_fill_")
        if expr.func.attr.value in (zeroing + ("masked_select",) if selected else zeroing):
            return expr.args[0].value
    return None


def mask_evidence(ctx: "FileContext", mask: cst.BaseExpression, what: str = "nothing is selected") -> Optional[str]:
    """Why `mask` can select nothing, as `when <what>: <its origin>`, or None: a padding or
    length mask, a bounded one, or one whose origin is unknown here (`mask_origin`)."""
    found = mask_origin.origin(ctx, mask)
    return f"when {what}: {found.why}" if found.why is not None else None


def _is_non_negative_op(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[str]:
    """relu / abs / clamp(min=0): outputs that are exactly 0 for a whole region of inputs."""
    absolute = match_call(ctx.imports, expr, "abs")
    if absolute is not None:
        return None if is_learned(ctx, absolute.input) else "absolute values"
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        if qual in ("torch.relu", "torch.nn.functional.relu") or (
            isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "relu" and qual is None
        ):
            return "relu outputs"
    clamp = match_call(ctx.imports, expr, "clamp", "clip", "clamp_min")
    if clamp is not None and clamp.given("min") and number_value(clamp.arg("min")) == 0:
        return "values clamped at 0"
    return None


def row_evidence(ctx: "FileContext", expr: cst.CSTNode, strong: bool = False) -> Optional[str]:
    """Why the rows of `expr` can be all zero (so its norm is 0), or None: a difference that can
    be 0 (`difference_evidence`; `strong` leaves out two values that merely can coincide),
    rows a mask zeroes, relu/abs outputs, or the input of a module's `forward` (padding
    rows, an all-zero input). Of a name several assignments may give, the first unguarded one
    with a reason."""
    if isinstance(expr, cst.Param):
        return _FORWARD_INPUT if is_forward_input(ctx, expr) else None
    if not isinstance(expr, cst.BaseExpression):
        return None
    for origin in _origins(ctx, expr):
        if isinstance(origin, cst.BinaryOperation) and isinstance(origin.operator, cst.Subtract):
            return difference_evidence(ctx, origin, strong)
        zeroing = _mask_of(ctx, origin, selected=False)
        if zeroing is not None:
            return mask_evidence(ctx, zeroing, "a mask zeroes a whole row")
        what = _is_non_negative_op(ctx, origin)
        if what is not None:
            return f"where all the {what} are 0"
        if branches(ctx, origin) is not None:
            return some_way(ctx, origin, lambda value: row_evidence(ctx, value, strong))
        param = _param_at(ctx, origin)
        if param is not None and is_forward_input(ctx, param):
            return _FORWARD_INPUT
    return None


_FORWARD_INPUT = "for an all-zero input row of `forward` (padding, an empty input)"


def summand_evidence(ctx: "FileContext", summed: cst.BaseExpression) -> Tuple[Optional[str], bool]:
    """(why a sum of `summed` can be 0, or None; whether every term is known to be >= 0): masks
    and selections that can be empty, weights that can all be 0, relu/abs outputs. Of a name
    several assignments may give, the first unguarded one with a reason (the signs of the other
    ways' terms unknown)."""
    for origin in _origins(ctx, summed):
        if branches(ctx, origin) is not None and not is_mask(ctx, origin):
            return some_way(ctx, origin, lambda value: _summand_reason(ctx, value)), False
        if is_mask(ctx, origin):
            return mask_evidence(ctx, origin), True
        chosen = _mask_of(ctx, origin)
        if chosen is not None:
            return mask_evidence(ctx, chosen, "the mask selects nothing"), False
        what = _is_non_negative_op(ctx, origin)
        if what is not None:
            return f"when all the {what} are 0", True
        if isinstance(origin, cst.Name) and "weight" in origin.value.lower():
            # weights given by the caller can all be 0 (the confidences of rejected matches);
            # weights computed here (`torch.ones(n) * m`, `w + alpha`) are the code's to know
            param = _param_at(ctx, origin)
            func = _function_of(ctx, param) if param is not None else None
            if func is not None and param is not None and func.name.value != "__init__" and _annotation(param) != "Parameter":
                return "when every weight is 0", False
    return None, False


def _summand_reason(ctx: "FileContext", value: cst.CSTNode) -> Optional[str]:
    return summand_evidence(ctx, value)[0] if isinstance(value, cst.BaseExpression) else None


def is_data(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `expr` is data handed to the code rather than computed by it: a parameter (not a
    learned one), what is unpacked or iterated from one (`s, a, adv = batch`, `for x in loader`),
    or an attribute or item of such a value or of a module-level name (`dataset.data.y`). Data
    can be constant (a blank image, equal rewards); a model's output or fresh noise is not.
    Every way the value comes must be data."""
    if depth > 6:
        return False
    expr = strip_parens(expr)
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = strip_parens(expr.value)
    if not isinstance(expr, cst.Name) or expr.value == "self":
        return False
    if ways(ctx, expr) is None:
        return not ctx.bindings_before(expr)  # a module-level name: a dataset, a table
    return every_way(ctx, expr, "data", lambda value: _data(ctx, value, depth))


def _data(ctx: "FileContext", node: cst.CSTNode, depth: int) -> bool:
    if isinstance(node, cst.Param):
        return _annotation(node) != "Parameter"
    if isinstance(node, cst.BaseExpression):
        return is_data(ctx, node, depth + 1)
    if isinstance(node, cst.For):
        return True
    source = getattr(node, "value", None)  # a tuple unpacked from a value
    return isinstance(source, cst.BaseExpression) and is_data(ctx, source, depth + 1)


def standardises(ctx: "FileContext", numerator: Optional[cst.BaseExpression], spread_of: cst.BaseExpression) -> bool:
    """Whether `numerator` is `x - x.mean(...)` for the `x` whose std/variance divides it, and x
    is data (`is_data`): a standardisation, 0/0 for constant data (a constant feature, equal
    rewards, a blank image)."""
    if numerator is None or not is_data(ctx, spread_of):
        return False
    for origin in _origins(ctx, numerator):
        found = branches(ctx, origin)
        if found is not None:  # a standardisation on one way is enough
            return any(
                isinstance(way.value, cst.BaseExpression) and standardises(ctx, way.value, spread_of)
                for way in found
                if way.value is not origin
            )
        if isinstance(origin, cst.BinaryOperation) and isinstance(origin.operator, cst.Subtract):
            mean = match_call(ctx.imports, strip_parens(ctx.resolve(origin.right)), "mean")
            if mean is not None and same_code(ctx, mean.input, origin.left) and same_code(ctx, origin.left, spread_of):
                return True
            return False
    return False
