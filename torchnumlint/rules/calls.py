"""Which torch op a call is: the ops (`OPS`, `make_op`), and `match_call`, which reads a call
in function form (every alias) or method form as a `CallMatch` with its arguments bound to the
op's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

import libcst as cst

from torchnumlint.rules.imports import ImportMap


@dataclass(frozen=True)
class Op:
    name: str
    functions: FrozenSet[str]
    method: Optional[str]
    params: Tuple[str, ...]  # parameters after the tensor input, in order
    method_params: Optional[Tuple[str, ...]] = None  # when the method's order differs
    input_kw: str = "input"


def make_op(name, functions, method=None, params=(), method_params=None, input_kw="input") -> Op:
    return Op(name, frozenset(functions), method, tuple(params), method_params, input_kw)


_F = "torch.nn.functional."


OPS: Dict[str, Op] = {
    op.name: op
    for op in (
        make_op(
            "softmax",
            {"torch.softmax", _F + "softmax", "torch.special.softmax"},
            "softmax",
            ("dim", "_stacklevel", "dtype"),
            ("dim", "dtype"),
        ),
        make_op(
            "log_softmax",
            {"torch.log_softmax", _F + "log_softmax", "torch.special.log_softmax"},
            "log_softmax",
            ("dim", "_stacklevel", "dtype"),
            ("dim", "dtype"),
        ),
        make_op("sigmoid", {"torch.sigmoid", _F + "sigmoid", "torch.special.expit"}, "sigmoid"),
        make_op("logsigmoid", {_F + "logsigmoid"}),
        make_op("log", {"torch.log"}, "log"),
        make_op("log1p", {"torch.log1p", "torch.special.log1p"}, "log1p"),
        make_op("exp", {"torch.exp", "torch.special.exp"}, "exp"),
        make_op("sqrt", {"torch.sqrt"}, "sqrt"),
        make_op("rsqrt", {"torch.rsqrt"}, "rsqrt"),
        make_op("pow", {"torch.pow"}, "pow", ("exponent",)),
        make_op("square", {"torch.square"}, "square"),
        make_op("abs", {"torch.abs"}, "abs"),
        make_op("sum", {"torch.sum"}, "sum", ("dim", "keepdim", "dtype")),
        make_op("mean", {"torch.mean"}, "mean", ("dim", "keepdim", "dtype")),
        make_op("std", {"torch.std"}, "std", ("dim", "unbiased", "keepdim")),
        make_op("var", {"torch.var"}, "var", ("dim", "unbiased", "keepdim")),
        make_op("norm", {"torch.norm"}, "norm", ("p", "dim", "keepdim", "dtype")),
        make_op("linalg_norm", {"torch.linalg.norm"}, None, ("ord", "dim", "keepdim")),
        make_op("vector_norm", {"torch.linalg.vector_norm"}, None, ("ord", "dim", "keepdim")),
        make_op("clamp", {"torch.clamp", "torch.clip"}, "clamp", ("min", "max")),
        make_op("clip", set(), "clip", ("min", "max")),
        make_op("clamp_min", {"torch.clamp_min"}, "clamp_min", ("min",)),
        make_op("clamp_", set(), "clamp_", ("min", "max")),
        make_op("clamp_min_", set(), "clamp_min_", ("min",)),
        make_op("maximum", {"torch.maximum", "torch.fmax"}, "maximum", ("other",)),
        make_op("max", {"torch.max"}, "max", ("dim", "keepdim")),
        make_op("detach", set(), "detach"),
        make_op("gather", {"torch.gather"}, "gather", ("dim", "index", "sparse_grad")),
        make_op("div", {"torch.div", "torch.divide", "torch.true_divide"}, "div", ("other", "rounding_mode")),
        make_op("divide", set(), "divide", ("other", "rounding_mode")),
        make_op("true_divide", set(), "true_divide", ("other",)),
        make_op("div_", set(), "div_", ("other", "rounding_mode")),
        make_op("count_nonzero", {"torch.count_nonzero"}, "count_nonzero", ("dim",)),
        make_op("softplus", {_F + "softplus"}, None, ("beta", "threshold")),
        make_op("normalize", {_F + "normalize"}, None, ("p", "dim", "eps")),
        make_op("kl_div", {_F + "kl_div"}, None, ("target", "size_average", "reduce", "reduction", "log_target")),
        make_op("nll_loss", {_F + "nll_loss"}, None, ("target", "weight", "size_average", "ignore_index", "reduce", "reduction")),
        make_op(
            "cross_entropy",
            {_F + "cross_entropy"},
            None,
            ("target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"),
        ),
    )
}


@dataclass
class CallMatch:
    """A call recognised as an Op: its tensor input and its other arguments by parameter name."""

    op: Op
    call: cst.Call
    input: cst.BaseExpression
    form: str  # "function" or "method"
    args: Dict[str, cst.Arg] = field(default_factory=dict)
    extra: Tuple[cst.Arg, ...] = ()  # arguments we could not place (*args, **kwargs, surplus)

    def arg(self, name: str) -> Optional[cst.BaseExpression]:
        found = self.args.get(name)
        return found.value if found is not None else None

    def given(self, name: str) -> bool:
        """Argument `name` was passed and is not `None` (`clamp(x, min=None)` sets no floor)."""
        value = self.arg(name)
        return value is not None and not is_literal(value, "None")

    @property
    def fully_known(self) -> bool:
        """No *args/**kwargs: every argument the user passed is accounted for."""
        return not self.extra


def match_call(imports: ImportMap, node: cst.CSTNode, *names: Union[str, Op]) -> Optional[CallMatch]:
    """Match `node` against the Ops `names` (keys of OPS, or Op objects) in function form (any
    alias) or method form."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    qual = imports.qualname(func)
    for name in names:
        op = name if isinstance(name, Op) else OPS[name]
        if qual is not None and qual in op.functions:
            return _bind(op, node, node.args, None, "function")
        if (
            op.method is not None
            and isinstance(func, cst.Attribute)
            and func.attr.value == op.method
            and not imports.is_module_ref(func.value)
            and not is_literal(func.value, "self")  # `self.softmax(x)`: a module's own, not Tensor.softmax
        ):
            params = op.method_params if op.method_params is not None else op.params
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if positional and op.method in _MODULE_NAMED and not _dim_like(positional[0].value):
                continue  # `rnn.softmax(x)`: a module's softmax given a tensor, not Tensor.softmax(dim)
            if len(positional) <= len(params):
                return _bind(op, node, node.args, func.value, "method")
    return None


# Tensor methods that modules also have under the same name (`self.softmax = nn.Softmax(-1)`).
_MODULE_NAMED = frozenset({"softmax", "log_softmax"})


def _dim_like(expr: cst.BaseExpression) -> bool:
    """Whether `expr` can be a dimension: an integer (`-1`), a name or attribute that says so
    (`dim`, `self.axis`, `d`), `len(...)`, `x.dim()`/`x.ndim`, or arithmetic of those. A tensor
    name (`x`, `logits`) is not: `m.softmax(x)` calls a module, whose `log_softmax` may not exist."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(_dim_like(element.value) for element in expr.elements)
    if isinstance(expr, cst.UnaryOperation):
        return _dim_like(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _dim_like(expr.left) or _dim_like(expr.right)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        ident = (expr.value if isinstance(expr, cst.Name) else expr.attr.value).lower()
        return ident in ("d", "ax", "ndim") or "dim" in ident or "axis" in ident or "axes" in ident
    if isinstance(expr, cst.Call):
        func = expr.func
        return (isinstance(func, cst.Name) and func.value == "len") or (
            isinstance(func, cst.Attribute) and func.attr.value in ("dim", "ndimension")
        )
    return False


def _bind(op: Op, call: cst.Call, args: Sequence[cst.Arg], receiver, form: str) -> Optional[CallMatch]:
    params = op.params if form == "function" or op.method_params is None else op.method_params
    bound: Dict[str, cst.Arg] = {}
    extra: List[cst.Arg] = []
    positional = [a for a in args if a.keyword is None and not a.star]
    names = list(params) if receiver is not None else [op.input_kw] + list(params)
    for arg, pname in zip(positional, names):
        bound[pname] = arg
    extra.extend(positional[len(names) :])
    for arg in args:
        if arg.star:
            extra.append(arg)
        elif arg.keyword is not None:
            bound[arg.keyword.value] = arg
    if receiver is None:
        first = bound.pop(op.input_kw, None)
        if first is None:
            if op.input_kw == "input" and "x" in bound:  # some aliases spell it x
                first = bound.pop("x")
            else:
                return None
        receiver = first.value
    if any(name not in params for name in bound):
        return None  # not this op's signature: not the call we think it is
    return CallMatch(op, call, receiver, form, bound, tuple(extra))


def is_literal(expr: Optional[cst.BaseExpression], word: str) -> bool:
    """`expr` is the bare name `word`: `True`, `False`, `None`, `self`."""
    return isinstance(expr, cst.Name) and expr.value == word
