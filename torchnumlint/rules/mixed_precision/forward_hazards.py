"""What a forward computes in float16 that overflows or underflows: TNL301's decision, made from
the facts the project index records (`torchnumlint/forward_facts.py`) under the CUDA autocast
policy of the catalogue ("Autocast facts").

CUDA autocast runs a list of ops in float32 (`FP32_OPS`: exp, log, pow, sum, softmax, the norms,
the losses) and leaves the rest in float16, whose largest value is 65504. A value is float16 here
when it is certainly a tensor (a tensor parameter, computed from one, or what a submodule gives:
`self.proj(x)` of a torch layer or a project module, `module_outputs.py`; not a Python number such
as a size) and nothing on its way made it float32 (an op of that list, `.to(torch.float32)`,
`.float()`). Hazards, each with the text a finding shows:

- a square `x * x` of a float16 value (Inf once |x| > 255);
- an eps added to a float16 value as a denominator (`x / (n + 1e-8)`): below 2.98e-8 it rounds to
  0 in float16, from 2.98e-8 up to 1.53e-5 it is a subnormal whose reciprocal is Inf; under a
  root or a log (`sqrt(v + eps)`) only the first is (a subnormal still keeps the value off 0);
- `masked_fill` of a value not known to be float32 with a constant beyond 65504 (finite: an
  infinite fill is the masking rules' business);
- `var` of a float16 value (the variance of values beyond 255 overflows);
- in a custom `autograd.Function`, a compiled extension kernel (often written for float32).

Not hazards: ops CUDA runs in float32, bounded ops (`sigmoid`, `tanh`), `sqrt`, `mean` (accumulates
in float32), Python-number arithmetic (`d * d` of a size), an explicit `.half()` (under fp16
autocast the values are float16 already: the cast adds no overflow), anything in an island
(autocast disabled or bfloat16 around it), and all of a forward decorated with
`custom_fwd(cast_inputs=torch.float32)` or a non-float16 autocast. One hazard per line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, Optional

from torchnumlint.forward_facts import Attr, BinOp, Call, Expr, Forward, Item, Name, Number, Ref, Span, Unary
from torchnumlint.rules.autocast import FP16_INF_RECIPROCAL, FP16_MAX, FP16_ROUNDS_TO_ZERO, FP16_TINY, FP32_DTYPES
from torchnumlint.rules.module_outputs import layer_output

if TYPE_CHECKING:
    from torchnumlint.index import ClassInfo

# The project class a reference means: (simple name, qualified name, the path it is named from).
Lookup = Callable[[str, Optional[str], str], Optional["ClassInfo"]]

# Ops that CUDA autocast runs in fp32 (or that promote): their result is no fp16 hazard.
FP32_OPS = frozenset(
    {
        "exp",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "pow",
        "float_power",
        "sum",
        "nansum",
        "prod",
        "cumsum",
        "cumprod",
        "softmax",
        "log_softmax",
        "logsumexp",
        "norm",
        "vector_norm",
        "matrix_norm",
        "layer_norm",
        "group_norm",
        "rms_norm",
        "batch_norm",
        "instance_norm",
        "rsqrt",
        "reciprocal",
        "softplus",
        "cosine_similarity",
        "normalize",
        "float",
        "double",
        "acos",
        "asin",
        "cosh",
        "sinh",
        "tan",
        "erfinv",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "cross_entropy",
        "nll_loss",
        "kl_div",
        "binary_cross_entropy_with_logits",
        "dist",
        "cdist",
        "pdist",
        "renorm",
        "softmin",
    }
)
# Tensor methods whose value is a plain Python number (or tuple of them).
NUMBER_METHODS = frozenset({"size", "numel", "nelement", "dim", "item", "tolist", "stride", "element_size"})
# Ops whose input an eps guards: a zero there is Inf/NaN (`sqrt` only in its gradient).
EPS_GUARDED = frozenset({"sqrt", "rsqrt", "log", "log2", "log10"})
# How far a value is followed (through its operands and the names it is bound to).
DEPTH = 12

SQUARE = "`x * x` product (overflows float16 once |x| > 255)"
VARIANCE = "`var` (the variance of values beyond 255 overflows float16)"


@dataclass(frozen=True)
class Hazard:
    what: str  # what a finding says overflows: "`x * x` product (...)", "eps 1e-08 rounds to 0 ..."
    span: Span  # the expression a finding points at
    kind: str = ""  # "fill": a masked_fill constant (TNL305's when it runs); "eps": an eps (TNL303's)


def eps_text(eps: float) -> str:
    """Which of the two float16 failures of a small eps applies."""
    if eps < FP16_ROUNDS_TO_ZERO:
        return f"eps {eps:g} rounds to 0 in float16 (below 2.98e-8), so it guards nothing"
    return f"eps {eps:g} is a float16 subnormal whose reciprocal is Inf (from 2.98e-8 up to 1.53e-5)"


def fill_text(value: float) -> str:
    return f"`masked_fill` with {value:g} (beyond the float16 range, 65504)"


def forward_hazards(info: "ClassInfo", lookup: Optional[Lookup] = None) -> List[Hazard]:
    """The float16 hazards of the class's own forward, in source order, one per line. Compiled
    extension kernels count only in a class written directly on `torch.autograd.Function`.
    `lookup` finds the project classes its submodules are (`ProjectIndex.lookup`): what calling
    them gives is then known too (`module_outputs.py`)."""
    forward = info.forward
    if forward is None or forward.cast_inputs_fp32 or forward.under_island:
        return []
    return _Judge(forward, info.direct_kind == "function", info.path, lookup).hazards()


def output_kind(info: "ClassInfo", lookup: Optional[Lookup], seen: FrozenSet[str] = frozenset()) -> Optional[str]:
    """What calling a project module gives under CUDA fp16 autocast, as `module_outputs.py` says of
    torch layers: "fp32" when every value its forward returns is a float32 tensor, "fp16" when
    every one is a float16 tensor (the judge's reading), else None (unknown, also for a cycle)."""
    forward = info.forward
    key = f"{info.path}:{info.name}"
    if forward is None or not forward.returns or key in seen or len(seen) > DEPTH:
        return None
    judge = _Judge(forward, False, info.path, lookup, seen | {key})
    if all(judge.fp32(ref) for ref in forward.returns):
        return "fp32"
    if all(judge.fp16(ref) for ref in forward.returns):
        return "fp16"
    return None


class _Judge:
    """The CUDA autocast policy over one recorded forward."""

    def __init__(
        self, forward: Forward, kernels: bool, path: str = "", lookup: Optional[Lookup] = None, seen: FrozenSet[str] = frozenset()
    ) -> None:
        self.forward = forward
        self.kernels = kernels
        self.path = path
        self.lookup = lookup
        self.seen = seen
        bound: Dict[str, List[Ref]] = {}
        for binding in forward.bindings:
            if not binding.island:  # what an island binds is not float16's business
                bound.setdefault(binding.name, []).append(binding.value)
        # names bound once, plainly, outside islands: their value is known wherever they are read
        self.values = {name: refs[0] for name, refs in bound.items() if len(refs) == 1 and refs[0] is not None}
        # eps-like numbers: `self.eps` set in __init__ and parameters' defaults, by name
        self.small = {k: v for k, v in forward.init_numbers.items() if 0 < v < FP16_TINY}
        self.small.update((k, v) for k, v in forward.defaults.items() if 0 < v < FP16_TINY)

    def hazards(self) -> List[Hazard]:
        found: List[Hazard] = []
        for position, expr in enumerate(self.forward.exprs):
            if not isinstance(expr, (BinOp, Call)) or self.forward.in_island(position):
                continue
            hazard = self._hazard(expr)
            if hazard is not None and all(h.span.line != hazard.span.line for h in found):
                found.append(hazard)
        return found

    def _hazard(self, expr: Expr) -> Optional[Hazard]:
        if isinstance(expr, BinOp):
            if expr.op == "Mult" and expr.same and self.fp16(expr.left):
                return Hazard(SQUARE, expr.span)
            eps = self._eps(expr.right) if expr.op == "Div" else None
            if eps is not None:  # a denominator: a zero-valued eps and a subnormal one both fail
                return Hazard(eps_text(eps), self._at(expr.right).span, "eps")  # type: ignore[union-attr]  # a recorded operand (`_at` gives None only for no ref)
            return None
        if not isinstance(expr, Call):
            return None
        qual = expr.qual
        name = qual.rsplit(".", 1)[-1] if qual and qual.startswith("torch.") else None if qual else expr.method
        receiver = (expr.args[0] if expr.args else None) if qual else expr.receiver
        if receiver is None:
            return self._kernel(expr)
        if name in EPS_GUARDED:
            eps = self._eps(receiver)
            if eps is not None and eps < FP16_ROUNDS_TO_ZERO:  # a subnormal eps still guards a root or log
                return Hazard(eps_text(eps), self._at(receiver).span, "eps")  # type: ignore[union-attr]  # a recorded operand (`_at` gives None only for no ref)
        if name in ("masked_fill", "masked_fill_"):
            return self._fill(expr, receiver)
        if name == "var" and self.fp16(receiver):
            return Hazard(VARIANCE, expr.span)
        return self._kernel(expr)

    def _fill(self, call: Call, receiver: int) -> Optional[Hazard]:
        """`x.masked_fill(m, value)` / `torch.masked_fill(x, m, value)` with a finite constant
        beyond float16's range, on a value not known to be float32."""
        value = call.args[-1] if len(call.args) >= (3 if call.qual else 2) else None
        value = next((ref for keyword, ref in call.keywords if keyword == "value"), value)
        fill = self._at(value)
        if isinstance(fill, Number) and FP16_MAX < abs(fill.value) < float("inf") and not self.fp32(receiver):
            return Hazard(fill_text(fill.value), call.span, "fill")
        return None

    def _kernel(self, call: Call) -> Optional[Hazard]:
        if self.kernels and call.kernel is not None:
            return Hazard(f"compiled extension kernel `{call.kernel}`", call.span)
        return None

    def _eps(self, ref: Ref) -> Optional[float]:
        """The eps of `t + eps` where `t` is a float16 tensor: the sum is computed in float16."""
        expr = self._at(ref)
        if not (isinstance(expr, BinOp) and expr.op == "Add"):
            return None
        for eps_ref, other in ((expr.right, expr.left), (expr.left, expr.right)):
            value = self._number(eps_ref)
            if value is not None and 0 < value < FP16_INF_RECIPROCAL and self.fp16(other):
                return value
        return None

    def _number(self, ref: Ref) -> Optional[float]:
        """A literal, or an eps-like name: a parameter defaulting to one, `self.eps` from `__init__`."""
        expr = self._at(ref)
        if isinstance(expr, Number):
            return expr.value
        if isinstance(expr, Name):
            return self.small.get(expr.id)
        owner = self._at(expr.value) if isinstance(expr, Attr) else None
        if isinstance(owner, Name) and owner.id == "self":
            return self.small.get(expr.attr)  # type: ignore[union-attr]  # an Attr: `owner` is set only for one
        return None

    # -- values ----------------------------------------------------------------------------------
    def _at(self, ref: Ref) -> Optional[Expr]:
        return self.forward.exprs[ref] if ref is not None else None

    def _bound(self, name: Name) -> Ref:
        """What a local (not a parameter) is bound to, when it is bound once, plainly."""
        return self.values.get(name.id) if name.id not in self.forward.params else None

    def fp16(self, ref: Ref) -> bool:
        return self.tensor(ref) and not self.fp32(ref)

    def fp32(self, ref: Ref, depth: int = 0) -> bool:
        """Whether the value is a float32 (or wider) tensor under CUDA autocast."""
        expr = self._at(ref)
        if depth > DEPTH:
            return False
        if isinstance(expr, Name):
            value = self._bound(expr)
            return value is not None and self.fp32(value, depth + 1)
        if isinstance(expr, BinOp):
            return expr.op == "Pow" or self.fp32(expr.left, depth + 1) or self.fp32(expr.right, depth + 1)
        if isinstance(expr, Unary):
            return self.fp32(expr.operand, depth + 1)
        if isinstance(expr, Item):
            return self.fp32(expr.value, depth + 1)
        if isinstance(expr, Attr):
            return expr.attr in ("values", "real", "T", "mT") and self.fp32(expr.value, depth + 1)
        if isinstance(expr, Call):
            return self._call_fp32(expr, depth)
        return False

    def _call_fp32(self, call: Call, depth: int) -> bool:
        kind = self._submodule(call)
        if kind is not None:
            return kind == "fp32" or (kind == "keep" and bool(call.args) and self.fp32(call.args[0], depth + 1))
        qual = call.qual
        name = qual.rsplit(".", 1)[-1] if qual else call.method
        if name in FP32_OPS:
            return True
        if name in ("to", "type"):
            return any(dtype in FP32_DTYPES for dtype in call.dtypes)
        if qual is None and call.method is not None:
            # a method keeps its receiver's dtype, unless it casts to a 16-bit one
            return name not in ("half", "bfloat16") and self.fp32(call.receiver, depth + 1)
        if qual is not None and qual.startswith("torch.") and call.args:
            return self.fp32(call.args[0], depth + 1)
        return False

    def tensor(self, ref: Ref, depth: int = 0) -> bool:
        """Whether the value is certainly a tensor (a tensor parameter, computed from one, or what a
        submodule gives), not a Python number (a size, a count) and not unknown."""
        expr = self._at(ref)
        if depth > DEPTH:
            return False
        if isinstance(expr, Name):
            if expr.id in self.forward.params:
                return True
            value = self._bound(expr)
            return value is not None and self.tensor(value, depth + 1)
        if isinstance(expr, BinOp):
            return self.tensor(expr.left, depth + 1) or self.tensor(expr.right, depth + 1)
        if isinstance(expr, Unary):
            return self.tensor(expr.operand, depth + 1)
        if isinstance(expr, Item):
            return self.tensor(expr.value, depth + 1)
        if isinstance(expr, Attr):
            return expr.attr in ("T", "mT", "real", "imag", "data") and self.tensor(expr.value, depth + 1)
        if isinstance(expr, Call):
            if self._submodule(expr) is not None:
                return True
            if expr.qual is not None:
                return expr.qual.startswith("torch.")
            return expr.method is not None and expr.method not in NUMBER_METHODS and self.tensor(expr.receiver, depth + 1)
        return False

    # -- submodules ------------------------------------------------------------------------------
    def _submodule(self, call: Call) -> Optional[str]:
        """What `self.attr(x)` gives when `__init__` made `self.attr` a torch layer or a project
        module: "fp16", "fp32", "keep" (its input's dtype), or None (not a submodule, unknown).
        A linear-or-identity (two constructions) keeps its input's dtype at best: "keep"."""
        receiver = self._at(call.receiver)
        if call.qual is not None or call.method is None or not (isinstance(receiver, Name) and receiver.id == "self"):
            return None
        made = self.forward.submodules.get(call.method)
        if not made:
            return None
        kinds = {self._kind(name, qual) for name, qual in made}
        if None in kinds:
            return None
        if len(kinds) == 1:
            return kinds.pop()
        return "keep" if kinds <= {"fp16", "keep"} else None

    def _kind(self, name: str, qual: Optional[str]) -> Optional[str]:
        kind = layer_output(qual)
        if kind is not None or not name or self.lookup is None:
            return kind
        info = self.lookup(name, qual, self.path)
        return output_kind(info, self.lookup, self.seen) if info is not None and info.kind == "module" else None
