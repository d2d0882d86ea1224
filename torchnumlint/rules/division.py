"""TNL2xx, guards, norms and domains: a division by a norm, sum, deviation or count that can be 0;
a hand-written `F.normalize`; a square root of a sum of squares; a square root (or fractional
power) of a value that can reach 0 or go negative.

Ownership between the rules, so that one hazard gives one finding (declared in `ownership.py`,
and only while the owner is enabled):
- `x / x.norm(dim=d, keepdim=True)` (2-norm, same x) is TNL202's; TNL201 takes every other norm.
- A square root written directly as a denominator (`x / torch.sqrt(v)`) is TNL201's (its fix
  clamps inside the root); a root anywhere else is TNL206's, and TNL201 does not follow a name to
  a root that TNL206 reports where it is computed.
- A square root of a sum of squares is TNL204's. As a denominator TNL201 still reports the
  division, without a fix: TNL204's rewrite to `vector_norm` comes first and the next fix pass
  then guards the norm (TNL201) or turns it into `F.normalize` (TNL202).
- A product with such a factor (`dot / (a.norm() * b.norm())`, a cosine similarity by hand) is
  TNL201's until the catalogue's cosine-similarity-manual rule exists to rewrite it; a pairwise
  distance (`((a[:, None] - b[None]) ** 2).sum(-1)`) is TNL204's (vector_norm, exact) until
  pairwise-distance-manual (torch.cdist) exists; sums of
  exponentials to softmax-manual, and a division inside `torch.where(...)` to
  where-unselected-branch (catalogue rules not written yet).
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.guards import (
    gradient_note,
    is_constant,
    is_guarded,
    is_mask,
    is_positive,
    is_tested,
    number_value,
    same_code,
    strip_parens,
    unwrap_casts,
)
from torchnumlint.rules.evidence import (
    STRICT_WHY,
    is_bounded,
    is_data,
    is_not_torch,
    is_torch_value,
    may_carry_grad,
    row_evidence,
    standardises,
    summand_evidence,
    value_kind,
)
from torchnumlint.rules.names import CallMatch, is_literal, is_plain, match_call
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.rewrite import with_clamp

# The guard the unsafe fixes write. 1e-12 is F.normalize's own eps: the smallest floor whose
# reciprocal square (1e24) still fits float32/bfloat16, so the gradient of `x / d` stays finite,
# and so small that the result is unchanged wherever the original was finite in practice. A count
# is an integer: it is clamped at 1, exact wherever the original was finite, and keeps its dtype.
EPS = "1e-12"
COUNT_EPS = "1"

DIV_METHODS = ("div", "divide", "true_divide", "div_")
NORMS = ("norm", "linalg_norm", "vector_norm")


# ---------------------------------------------------------------------------------------------
# Squares, roots, sums of squares


def square_base(ctx, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x ** 2`, `x.pow(2)`, `torch.pow(x, 2)`, `torch.square(x)`, `x * x` (plain x): x."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Power) and number_value(expr.right) == 2:
            return expr.left
        if isinstance(expr.operator, cst.Multiply) and is_plain(expr.left) and same_code(ctx, expr.left, expr.right):
            return expr.left
        return None
    match = match_call(ctx.imports, expr, "pow", "square")
    if match is None or not match.fully_known:
        return None
    if match.op.name == "pow":
        exponent = match.arg("exponent")
        return match.input if exponent is not None and number_value(exponent) == 2 else None
    return match.input if not match.args else None


def _fraction(expr: Optional[cst.BaseExpression]) -> Optional[float]:
    value = number_value(expr) if expr is not None else None
    return value if value is not None and value != int(value) else None


def root_of(ctx, node: cst.CSTNode) -> Optional[Tuple[str, cst.BaseExpression]]:
    """A square root, reciprocal root or fractional power: (`"sqrt"`/`"rsqrt"`/`"pow"`, its base)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        if _fraction(strip_parens(node.right)) is not None:
            return ("sqrt" if number_value(strip_parens(node.right)) == 0.5 else "pow"), node.left
        return None
    match = match_call(ctx.imports, node, "sqrt", "rsqrt", "pow")
    if match is None or not match.fully_known:
        return None
    if match.op.name == "pow":
        exponent = match.arg("exponent")
        if _fraction(exponent) is None:
            return None
        return ("sqrt" if number_value(exponent) == 0.5 else "pow"), match.input
    if match.args:
        return None
    return match.op.name, match.input


def sum_of_squares(ctx, expr: cst.BaseExpression, use: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, CallMatch]]:
    """`(x ** 2).sum(d)` and its spellings (through names too): (x, the sum). None when a name x
    reads is bound again before `use`."""
    total = strip_parens(ctx.resolve(expr))
    match = match_call(ctx.imports, total, "sum")
    if match is None or not match.fully_known or set(match.args) - {"dim", "keepdim"}:
        return None
    squared = strip_parens(ctx.resolve(match.input))
    base = square_base(ctx, squared)
    if base is None:
        return None
    followed = ctx.resolve(expr) is not expr or ctx.resolve(match.input) is not match.input
    if followed and ctx.rebound_between(base, use):
        return None
    return base, match


def vector_norm_fix(rule: Rule, root: cst.CSTNode, x: cst.BaseExpression, total: CallMatch):
    """`torch.linalg.vector_norm(x, dim=d, keepdim=k)` in place of `root`."""
    fix = rule.fix()
    ctx = rule.ctx
    code = ctx.module.code_for_node
    parts = [code(strip_parens(x))]
    for name in ("dim", "keepdim"):
        value = total.arg(name)
        if value is not None:
            parts.append(f"{name}={code(value)}")
    func = code(fix.ref("torch.linalg.vector_norm"))
    fix.replace(root, cst.parse_expression(f"{func}({', '.join(parts)})"))
    return fix


# ---------------------------------------------------------------------------------------------
# What can be 0 (a denominator) and what can be 0 or negative (under a root)


def root_hazard(ctx, value: cst.BaseExpression) -> Optional[str]:
    """Why a square root of `value` is unsafe (it can be 0 or negative, TNL206's set), or None.

    Deliberately narrow: a variance, a difference of tensors (or `c - t ** 2`), a mean of
    squares, a sum or mean of differences or absolute values. Never a plain number, a guarded
    value, exp/softmax/sigmoid/softplus, a sum of squares (TNL204's) or `a**2 + b**2` (atan-of-ratio's)."""
    v = strip_parens(ctx.resolve(value))
    if is_constant(ctx, v) or is_guarded(ctx, v) or is_positive(ctx, v):
        return None
    if isinstance(v, cst.BinaryOperation):
        op = v.operator
        if isinstance(op, cst.Subtract):
            if square_base(ctx, ctx.resolve(v.right)) is not None and not is_constant(ctx, v.right):
                return "a difference"
            if not is_constant(ctx, v.left) and not is_constant(ctx, v.right):
                return "a difference"
            return None
        if isinstance(op, (cst.Multiply, cst.Divide)):
            if is_constant(ctx, v.right):
                return root_hazard(ctx, v.left)
            if isinstance(op, cst.Multiply) and is_constant(ctx, v.left):
                return root_hazard(ctx, v.right)
        return None
    match = match_call(ctx.imports, v, "var", "sum", "mean")
    if match is None:
        return None
    if match.op.name == "var":
        return "a variance"
    inner = strip_parens(ctx.resolve(match.input))
    if square_base(ctx, inner) is not None:
        return "a mean of squares" if match.op.name == "mean" else None
    if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract):
        return "a sum of differences" if not (is_constant(ctx, inner.left) or is_constant(ctx, inner.right)) else None
    if match_call(ctx.imports, inner, "abs") is not None:
        return "a sum of absolute values"
    return None


_KIND_WORDS = {
    "count": "a count",
    "norm": "a norm",
    "sum": "a sum",
    "std": "a standard deviation",
    "var": "a variance",
    "sqrt": "a square root",
    "product": "a product of norms or sums",
}


def zero_kind(ctx, d: cst.BaseExpression) -> Optional[Tuple[str, cst.BaseExpression]]:
    """What kind of value that can be exactly 0 the denominator `d` is (following names), and
    the call that makes it; None when it cannot be 0 or is guarded."""
    v = unwrap_casts(ctx, d, detach=True)
    if is_constant(ctx, v) or is_guarded(ctx, v):
        return None
    if match_call(ctx.imports, v, "count_nonzero") is not None:
        return "count", v
    match = match_call(ctx.imports, v, "sum", *NORMS, "std", "var")
    if match is not None and match.form == "method" and is_literal(match.input, "self"):
        return None  # `self.norm(h)`: a module, not Tensor.norm
    if match is not None:
        inner = match.input
        if match.op.name in ("std", "var"):
            return match.op.name, v
        if is_guarded(ctx, inner) or is_constant(ctx, inner):
            return None
        if match.op.name != "sum":
            return "norm", v
        if is_positive(ctx, inner):
            return None
        return ("count" if is_mask(ctx, inner) else "sum"), v
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Multiply):
        # `a.norm(dim=-1) * b.norm(dim=-1)`: 0 as soon as one factor is
        if any(zero_kind(ctx, factor) is not None for factor in (v.left, v.right)):
            return "product", v
        return None
    root = root_of(ctx, v)
    if root is not None and root[0] == "sqrt":
        arg = root[1]
        if root_hazard(ctx, arg) is not None or sum_of_squares(ctx, arg, v) is not None:
            return "sqrt", v
        inner = zero_kind(ctx, arg)
        if inner is not None and inner[0] != "sqrt":
            return "sqrt", v
    return None


_COUNT_EVIDENCE = "when nothing is selected"
_STANDARDISING = "for constant data (a constant feature, equal rewards, a blank input)"


def zero_evidence(
    ctx, kind: str, value: cst.BaseExpression, numerator: Optional[cst.BaseExpression]
) -> Tuple[Optional[str], bool]:
    """(why the denominator `value`, of `kind` as `zero_kind` says, reaches 0 for real inputs, or
    None when nothing in the code says it does; whether it is never negative, so that a clamp
    keeps every value it can take)."""
    v = unwrap_casts(ctx, value, detach=True)
    if kind == "count":
        return _COUNT_EVIDENCE, True
    if kind == "product":
        factors = [f for f in (v.left, v.right) if zero_kind(ctx, f) is not None]  # type: ignore[attr-defined]
        found = [zero_evidence(ctx, *zero_kind(ctx, f), numerator) for f in factors]  # type: ignore[misc]
        why = next((w for w, _ in found if w is not None), None)
        others = [f for f in (v.left, v.right) if zero_kind(ctx, f) is None]  # type: ignore[attr-defined]
        positive = all((number_value(strip_parens(f)) or 0) > 0 for f in others)
        return why, all(nonneg for _, nonneg in found) and positive
    if kind == "sqrt":
        arg = root_of(ctx, v)[1]  # type: ignore[index]
        squares = sum_of_squares(ctx, arg, v)
        if squares is not None:
            return row_evidence(ctx, squares[0]), True
        hazard = root_hazard(ctx, arg)
        if hazard == "a variance":
            var = match_call(ctx.imports, strip_parens(ctx.resolve(arg)), "var")
            return (_STANDARDISING if var is not None and standardises(ctx, numerator, var.input) else None), True
        if hazard == "a mean of squares":
            mean = match_call(ctx.imports, strip_parens(ctx.resolve(arg)), "mean")
            base = square_base(ctx, strip_parens(ctx.resolve(mean.input))) if mean is not None else None
            return (row_evidence(ctx, base) if base is not None else None), True
        if hazard is not None:
            return f"where the terms of {hazard} coincide", True
        inner = zero_kind(ctx, arg)
        return (zero_evidence(ctx, *inner, numerator)[0] if inner is not None else None), True
    match = match_call(ctx.imports, v, "sum", *NORMS, "std", "var")
    if match is None:  # pragma: no cover - zero_kind found one
        return None, False
    if kind == "sum":
        return summand_evidence(ctx, match.input)
    if kind == "norm":
        return row_evidence(ctx, match.input), True
    return (_STANDARDISING if standardises(ctx, numerator, match.input) else None), True


# ---------------------------------------------------------------------------------------------
# Divisions


def division_operands(ctx, node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(numerator, denominator) of `x / d`, `x /= d`, `torch.div(x, d)`, `x.div(d)` (true division)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        return node.left, node.right
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign):
        return node.target, node.value
    match = match_call(ctx.imports, node, *DIV_METHODS)
    if match is not None and match.fully_known and "other" in match.args and "rounding_mode" not in match.args:
        return match.input, match.args["other"].value
    return None


def replaces_whole(node: cst.CSTNode) -> bool:
    """A division whose value can be replaced by another expression: not `x /= d`, not `x.div_(d)`."""
    if isinstance(node, cst.AugAssign):
        return False
    return not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "div_")


def in_where(ctx) -> bool:
    """Inside `torch.where(...)`: the forward selects the branch away where it is not finite, but
    its NaN still flows into the gradient (the catalogue's where-unselected-branch)."""
    return any(isinstance(n, cst.Call) and ctx.qualname(n.func) == "torch.where" for n in ctx.stack[:-1])


def normalize_site(ctx, x: cst.BaseExpression, d: cst.BaseExpression, use: cst.CSTNode):
    """For `x / x.norm(dim=k, keepdim=True)` (2-norm, same plain x, any norm spelling, the norm
    directly or through a name): the dim expression; else None."""
    if not is_plain(x):
        return None
    norm = strip_parens(ctx.resolve(d))
    match = match_call(ctx.imports, norm, *NORMS)
    if match is None or not match.fully_known or not same_code(ctx, match.input, x):
        return None
    if ctx.resolve(d) is not d and ctx.rebound_between(match.input, use):
        return None
    dim = match.arg("dim")
    if not match.given("dim") or isinstance(strip_parens(dim), (cst.Tuple, cst.List)):
        return None
    if not is_literal(match.arg("keepdim"), "True"):
        return None
    order = match.arg("p") if match.op.name == "norm" else match.arg("ord")
    if order is not None and number_value(order) != 2:
        return None
    if "dtype" in match.args:
        return None
    return dim


def _floor(ctx, arg: cst.BaseExpression) -> str:
    """The clamp floor for the argument of a root: 1 for a count, else EPS."""
    inner = zero_kind(ctx, arg)
    return count_floor(ctx, inner[1]) if inner is not None and inner[0] == "count" else EPS


def count_floor(ctx, count: cst.BaseExpression) -> str:
    """The clamp floor for a count: 1 (exact, and keeps an integer dtype) where it is sure to be
    an integer (`count_nonzero`, the sum of a comparison or a boolean), else EPS (a mask known
    only by its name can be soft: clamping a sum of 0.5 at 1 would change it)."""
    match = match_call(ctx.imports, count, "sum")
    if match is None or is_mask(ctx, match.input, by_name=False):
        return COUNT_EPS
    return EPS


def floor_safety(floor: str) -> Optional[Safety]:
    """A clamp at 1 of an integer count is exact wherever the original was finite (a count of 0
    made it Inf or NaN): SAFE. A clamp at eps changes tiny values: the rule's UNSAFE."""
    return Safety.SAFE if floor == COUNT_EPS else None


class _DivisionRule(Rule):
    """Visits every division form once."""

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self.division(node, node.left, node.right)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.DivideAssign):
            self.division(node, node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        operands = division_operands(self.ctx, node)
        if operands is not None:
            self.division(node, *operands)

    def division(self, node, x, d) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class UnguardedDivision(_DivisionRule):
    code = "TNL201"
    name = "unguarded-division"
    message = (
        "division by {what}, which is 0 {why}: Inf there, NaN (0/0) where the numerator is 0 too; "
        "guard the denominator{how}"
    )
    rationale = (
        "A norm, a sum, a standard deviation or variance, `abs().sum()`, a count of mask entries "
        "or a square root of such a value is exactly 0 for an all-zero, constant, empty or fully "
        "masked row, and then `x / d` is 0/0 = NaN in the forward pass and in every gradient that "
        "flows through it. The fix clamps the denominator: `d.clamp_min(1e-12)` (1e-12 is "
        "F.normalize's eps; its reciprocal square still fits float32 and bfloat16, so the "
        "gradient stays finite, and results are unchanged wherever d >= 1e-12). A count is "
        "clamped at 1, which is exact wherever the original was finite and keeps the integer "
        "dtype. A square root is clamped inside (`torch.sqrt(v.clamp_min(1e-12))`): clamping "
        "outside would leave the root's infinite derivative at 0 times a zero gradient, NaN again. "
        "A sum of signed values may need a different guard than clamping, and in float16 code "
        "1e-12 rounds to 0: compute the island in float32 (an eps alone overflows, the gradient "
        "being about 1/eps > 65504); for standardisation prefer `F.layer_norm`. The fix changes "
        "results where the denominator is below the floor, so it is unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("/", "div")
    # a denominator that can be 0 is built by one of these (directly or through a name)
    pattern = r"norm|sum|std|var|count_nonzero|sqrt|\*\*|pow"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def standardize(x):\n"
                "    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def standardize(x):\n"
                "    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True).clamp_min(1e-12)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def masked_mean(h, mask):\n"
                "    n = mask.sum(dim=1, keepdim=True)\n"
                "    return (h * mask).sum(dim=1, keepdim=True) / n\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def masked_mean(h, mask):\n"
                "    n = mask.sum(dim=1, keepdim=True)\n"
                "    return (h * mask).sum(dim=1, keepdim=True) / n.clamp_min(1e-12)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def token_loss(losses, targets: torch.Tensor, ignore_index=-100):\n"
                "    total = losses.sum()\n"
                "    total /= (targets != ignore_index).sum()\n"
                "    return total\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def token_loss(losses, targets: torch.Tensor, ignore_index=-100):\n"
                "    total = losses.sum()\n"
                "    total /= (targets != ignore_index).sum().clamp_min(1)\n"
                "    return total\n"
            ),
            safety="safe",
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "class Scaled(torch.nn.Module):\n"
                "    def forward(self, x, w, a):\n"
                "        y = torch.div(x, torch.linalg.norm(w))\n"
                "        z = (a - a.mean(0)) / torch.sqrt(a.var(0))\n"
                "        return y * z / w.abs().sum(-1, keepdim=True)\n"
            ),
            lines=(6, 7, 8),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "class Scaled(torch.nn.Module):\n"
                "    def forward(self, x, w, a):\n"
                "        y = torch.div(x, torch.linalg.norm(w).clamp_min(1e-12))\n"
                "        z = (a - a.mean(0)) / torch.sqrt(a.var(0).clamp_min(1e-12))\n"
                "        return y * z / w.abs().sum(-1, keepdim=True).clamp_min(1e-12)\n"
            ),
        ),
    )
    good = (
        "import math\nimport torch\n"
        "def attend(q, k, mask):\n"
        "    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
        "    s = s / q.shape[-1] ** 0.5 / len(mask) / k.numel()\n"
        "    return s / torch.sqrt(torch.tensor(q.shape[-1], dtype=q.dtype))\n",
        "import torch\n"
        "def guarded(x, mask, eps=1e-6):\n"
        "    a = x / (x.norm(dim=-1, keepdim=True) + eps)\n"
        "    b = x / x.std(-1, keepdim=True).clamp(min=1e-5)\n"
        "    c = (x * mask).sum(1) / mask.sum(1).clamp_min(1)\n"
        "    d = x / torch.sqrt(x.var(-1, keepdim=True) + eps)\n"
        "    e = x / torch.maximum(x.abs().sum(), torch.tensor(eps))\n"
        "    return a + b + c + d + e / x.sum().clamp(min=torch.finfo(x.dtype).eps)\n",
        "import torch\n"
        "def softmax(x):\n"
        "    e = torch.exp(x - x.max(-1, keepdim=True).values)\n"
        "    return e / e.sum(-1, keepdim=True)\n",
        "import torch\n"
        "def mean_loss(loss, mask):\n"
        "    n = mask.sum()\n"
        "    if n == 0:\n"
        "        return loss.sum() * 0\n"
        "    return (loss * mask).sum() / n\n",
        "import torch\n"
        "def unit(x):\n"
        "    return x / x.norm(dim=-1, keepdim=True)\n",
    )

    def division(self, node, x, d) -> None:
        ctx = self.ctx
        found = zero_kind(ctx, d)
        if found is None:
            return
        selected = in_where(ctx)
        note = gradient_note(ctx) if selected else ""
        if note is None:
            return  # selected away in the forward, and no gradient to poison here
        kind, value = found
        if (
            not selected
            and replaces_whole(node)
            and normalize_site(ctx, x, d, node) is not None
            and owned_elsewhere(ctx, self.code, "normalize")
        ):
            return
        root = root_of(ctx, value) if kind == "sqrt" else None
        if is_tested(ctx, d, value, *([root[1], ctx.resolve(root[1])] if root else [])):
            return  # `if var > 0: x /= torch.sqrt(var)`
        if is_not_torch(ctx, value):
            return  # numpy or Python numbers: not this linter's business, and no clamp_min
        why, non_negative = zero_evidence(ctx, kind, value, x)
        if why is None:
            if not ctx.strict:
                return
            why = STRICT_WHY
        direct = ctx.resolve(d) is d
        fix = None
        floor = EPS
        if selected:
            pass  # the guard belongs inside the `where`: the double-where rewrite is where-unselected-branch's
        elif not (non_negative and (is_torch_value(ctx, d) or is_torch_value(ctx, value))):
            pass  # clamp_min is a tensor method, and a clamp would flip a negative sum's sign
        elif kind == "sqrt":
            _, arg = root_of(ctx, value)  # type: ignore[misc]
            if not direct:
                if root_hazard(ctx, arg) is not None and owned_elsewhere(ctx, self.code, "named-root"):
                    return  # reported (and guarded) where the root is computed
                binding = ctx.binding(d)
                if (
                    binding is not None
                    and binding.rewritable
                    and strip_parens(binding.value) is value
                    and ctx.only_read_here(d)
                    and not self._vector_norm_first(arg, value)
                ):
                    # the root is read only here: guard it where it is computed
                    floor = _floor(ctx, arg)
                    fix = self.fix(floor_safety(floor)).replace(arg, with_clamp(arg, floor))
            elif not self._vector_norm_first(arg, value):
                floor = _floor(ctx, arg)
                fix = self.fix(floor_safety(floor)).replace(arg, with_clamp(arg, floor))
        else:
            floor = count_floor(ctx, value) if kind == "count" else EPS
            fix = self.fix(floor_safety(floor)).replace(d, with_clamp(d, floor))
        if selected:
            how = (
                " itself: `torch.where` selects the result away in the forward, but the unselected "
                "branch still sends NaN into the gradient (`x / torch.where(d > 0, d, 1)`)" + note
            )
        elif fix is not None:
            how = f": `.clamp_min({'1' if kind == 'count' and floor == COUNT_EPS else 'eps'})`"
        elif non_negative:
            how = " (`+ eps` or `.clamp_min(eps)`)"
        else:
            how = " without flipping its sign (e.g. `torch.where(d.abs() < eps, eps, d)`)"
        self.report(node if isinstance(node, cst.AugAssign) else d, fix, what=_KIND_WORDS[kind], why=why, how=how)


    def _vector_norm_first(self, arg: cst.BaseExpression, root: cst.BaseExpression) -> bool:
        """A root of a sum of squares whose exact rewrite to `vector_norm` (TNL204, when enabled)
        comes before any clamp."""
        return sum_of_squares(self.ctx, arg, root) is not None and owned_elsewhere(
            self.ctx, self.code, "root-of-sum-of-squares"
        )


class NormalizeManual(_DivisionRule):
    code = "TNL202"
    name = "normalize-manual"
    message = "`x / x.norm(dim, keepdim=True)` is 0/0 = NaN {why}; use `F.normalize(x, dim=...)`"
    rationale = (
        "Dividing a tensor by its own 2-norm gives 0/0 = NaN, forward and backward, for every "
        "all-zero row (padding, dead features, an empty bag). `F.normalize(x, dim=d)` computes "
        "`x / max(||x||, 1e-12)`: the same values wherever the norm is at least 1e-12, and 0 "
        "instead of NaN for a zero row. Only the explicit-dim, keepdim=True, 2-norm form of the "
        "same side-effect-free x is rewritten (other norms are TNL201's). In float16 the default "
        "eps rounds to 0: pass `eps=torch.finfo(x.dtype).tiny` there."
    )
    safety = Safety.SAFE
    needles = ("norm",)
    pattern = r"/|div"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def unit_rows(x):\n"
                "    h = torch.relu(x)\n"
                "    return h / h.norm(dim=-1, keepdim=True)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def unit_rows(x):\n"
                "    h = torch.relu(x)\n"
                "    return torch.nn.functional.normalize(h, dim=-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch.nn import functional as F\n"
                "\n"
                "\n"
                "class Head(torch.nn.Module):\n"
                "    def forward(self, feats, protos):\n"
                "        n = torch.linalg.norm(feats, dim=1, keepdim=True)\n"
                "        feats = feats / n\n"
                "        w = self.proj.weight / torch.norm(self.proj.weight, 2, 0, True)\n"
                "        return feats @ w * (\n"
                "            protos[0]\n"
                "            / torch.linalg.vector_norm(protos[0], dim=-1, keepdim=True)\n"
                "        )\n"
            ),
            lines=(8, 11),
            fixed=(
                "import torch\n"
                "from torch.nn import functional as F\n"
                "\n"
                "\n"
                "class Head(torch.nn.Module):\n"
                "    def forward(self, feats, protos):\n"
                "        n = torch.linalg.norm(feats, dim=1, keepdim=True)\n"
                "        feats = F.normalize(feats, dim=1)\n"
                "        w = self.proj.weight / torch.norm(self.proj.weight, 2, 0, True)\n"
                "        return feats @ w * (\n"
                "            F.normalize(protos[0], dim=-1)\n"
                "        )\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "def f(x, y):\n"
        "    a = x / y.norm(dim=-1, keepdim=True)\n"
        "    b = x / x.norm(dim=-1)\n"
        "    c = x / x.norm(p=1, dim=-1, keepdim=True)\n"
        "    return a + b + c + x / x.norm()\n",
        "import torch\nimport torch.nn.functional as F\n"
        "def f(x, eps=1e-8):\n"
        "    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps) + F.normalize(x, dim=-1)\n",
        "import torch\n"
        "def f(x, y):\n"
        "    n = x.norm(dim=1, keepdim=True)\n"
        "    x = x + y\n"
        "    return x / n + f(x) / f(x).norm(dim=1, keepdim=True)\n",
    )

    def division(self, node, x, d) -> None:
        if not replaces_whole(node) or in_where(self.ctx):
            return
        dim = normalize_site(self.ctx, x, d, node)
        if dim is None:
            return
        why = row_evidence(self.ctx, x)
        if why is None:
            if not self.ctx.strict:
                return  # the norm of a learned embedding or a network's output is never 0
            why = STRICT_WHY
        fix = self.fix()
        code = self.ctx.module.code_for_node
        func = code(fix.ref("torch.nn.functional.normalize"))
        fix.replace(node, cst.parse_expression(f"{func}({code(strip_parens(x))}, dim={code(dim)})"))
        self.report(node, fix, why=why)


class _RootRule(Rule):
    """Visits every square root, reciprocal root and fractional power once."""

    def visit_Call(self, node: cst.Call) -> None:
        self._visit(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._visit(node)

    def _visit(self, node: cst.CSTNode) -> None:
        root = root_of(self.ctx, node)
        if root is not None:
            self.root(node, *root)

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class SqrtOfSumOfSquares(_RootRule):
    code = "TNL204"
    name = "sqrt-of-sum-of-squares"
    message = (
        "square root of a sum of squares, which is 0 {why}: its gradient is NaN there (and it "
        "overflows float16 above 256); use `torch.linalg.vector_norm`{note}"
    )
    rationale = (
        "`torch.sqrt((x ** 2).sum(d))` is a 2-norm written by hand. At a zero vector the backward "
        "pass computes 0 * (1 / (2 * sqrt(0))) = 0 * inf = NaN, so one all-zero row poisons the "
        "whole gradient; in float16 the squares overflow once the norm passes 256. "
        "`torch.linalg.vector_norm(x, dim=d)` computes the same value (float tolerance), uses the "
        "subgradient 0 at the origin and scales internally. Only rewritten with an explicit dim "
        "(or a sum over everything); keepdim is kept. Pairwise distances "
        "(`((a[:, None] - b[None]) ** 2).sum(-1)`), where one zero on the diagonal makes every "
        "gradient entry NaN, get the same exact rewrite."
    )
    safety = Safety.SAFE
    needles = ("sum",)
    pattern = r"sqrt|\*\*|pow"  # a root of the sum
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def embedding_norm_loss(x):\n"
                "    h = x - x.mean(dim=-1, keepdim=True)\n"
                "    return torch.sqrt((h ** 2).sum(dim=-1))\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def embedding_norm_loss(x):\n"
                "    h = x - x.mean(dim=-1, keepdim=True)\n"
                "    return torch.linalg.vector_norm(h, dim=-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def distance_loss(a, h, mask):\n"
                "    d = a - a.mean(0)\n"
                "    r = torch.sqrt(torch.sum(d * d, dim=1))\n"
                "    g = (h * mask).pow(2).sum(1, True).sqrt()\n"
                "    return r + g.squeeze(1) + torch.square(torch.relu(a)).sum() ** 0.5\n"
            ),
            lines=(6, 7, 8),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def distance_loss(a, h, mask):\n"
                "    d = a - a.mean(0)\n"
                "    r = torch.linalg.vector_norm(d, dim=1)\n"
                "    g = torch.linalg.vector_norm(h * mask, dim=1, keepdim=True)\n"
                "    return r + g.squeeze(1) + torch.linalg.vector_norm(torch.relu(a))\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def pairwise_loss(a):\n"
                "    return torch.sqrt(((a[:, None] - a[None]) ** 2).sum(-1))\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def pairwise_loss(a):\n"
                "    return torch.linalg.vector_norm(a[:, None] - a[None], dim=-1)\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "def f(x, eps=1e-8):\n"
        "    a = torch.sqrt((x ** 2).sum(-1) + eps)\n"
        "    b = x.pow(2).sum(-1).clamp_min(1e-12).sqrt()\n"
        "    c = torch.sqrt((x ** 2).mean(-1))\n"
        "    return a + b + c + torch.sqrt((x ** 3).sum(-1))\n",
        "import torch\n"
        "def f(x):\n"
        "    return torch.linalg.vector_norm(x, dim=-1) + (x ** 2).sum(-1) + torch.sqrt(x.sum(-1))\n",
    )

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:
        if kind != "sqrt":
            return
        ctx = self.ctx
        found = sum_of_squares(ctx, arg, node)
        note = gradient_note(ctx) if found is not None else None
        if note is None or is_not_torch(ctx, found[0]) or not may_carry_grad(ctx, found[0]):  # type: ignore[index]
            return  # the hazard is the gradient at 0: only where one flows
        why = row_evidence(ctx, found[0], strong=True)
        if why is None:
            if not ctx.strict:
                return  # the norm of a learned embedding, a network's output, a residual
            why = STRICT_WHY
        torch_value = value_kind(ctx, node) == "torch" or is_torch_value(ctx, found[0])
        self.report(node, vector_norm_fix(self, node, *found) if torch_value else None, why=why, note=note)


def _mean_of_squares_of(ctx, second: cst.BaseExpression, mean: cst.BaseExpression) -> bool:
    """Whether `second - mean ** 2` is a variance by hand: `mean` is `x.mean(...)` and `second`
    is the mean of the squares of the same x."""
    first = match_call(ctx.imports, strip_parens(ctx.resolve(mean)), "mean")
    second_match = match_call(ctx.imports, strip_parens(ctx.resolve(second)), "mean")
    if first is None or second_match is None:
        return False
    base = square_base(ctx, strip_parens(ctx.resolve(second_match.input)))
    return base is not None and same_code(ctx, base, first.input)


def _is_cosine(ctx, expr: cst.BaseExpression) -> bool:
    """A cosine similarity, by `F.cosine_similarity`, by hand (a quotient by a norm) or by name
    (`cos_theta`, `cosine`), and not clamped inside (-1, 1)."""
    if is_bounded(ctx, expr):
        return False
    value = strip_parens(ctx.resolve(expr))
    ident = value.value if isinstance(value, cst.Name) else value.attr.value if isinstance(value, cst.Attribute) else ""
    if ident.lower().startswith("cos") and not ident.lower().startswith("cosh"):
        return True
    if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.nn.functional.cosine_similarity":
        return True
    return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide) and (
        zero_kind(ctx, value.right) is not None
    )


class UnguardedSqrtOrPow(_RootRule):
    code = "TNL206"
    name = "unguarded-sqrt-or-pow"
    message = "{op} of {what}, {edge}; clamp it first: `.clamp_min(eps)`{note}"
    rationale = (
        "A variance, a difference such as `E[x^2] - E[x]^2` or `1 - c ** 2`, or a mean of squares "
        "reaches exactly 0 for a constant or zero row and goes slightly negative through rounding. "
        "`sqrt` (and any fractional power) of a negative number is NaN; at 0 the derivative "
        "1 / (2 sqrt(v)) is infinite, so the backward pass gives inf or 0 * inf = NaN; `rsqrt` is "
        "already infinite in the forward pass. The fix clamps the argument inside the root, "
        "`torch.sqrt(v.clamp_min(1e-12))` (1e-12 as F.normalize's eps; the root is then at least "
        "1e-6 and its gradient finite). It moves results whose argument was below 1e-12, so it is "
        "unsafe. Roots of plain numbers, shapes, guarded values, exp/softplus/sigmoid and "
        "`x ** 2 + eps` are never flagged; a root of a sum of squares is TNL204's, and a root "
        "written directly as a denominator is TNL201's."
    )
    safety = Safety.UNSAFE
    needles = ("sqrt", "**", "pow")
    # a root: sqrt/rsqrt, or a power whose exponent is a fractional literal (`** 0.5`, `pow(1.5)`)
    pattern = r"sqrt|\*\*\s*\(?\s*-?\d*\.\d|\*\*\s*\(?\s*-?\d+e|pow\s*\("
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def inv_std(x):\n"
                "    return torch.rsqrt(x.var(dim=-1, keepdim=True))\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def inv_std(x):\n"
                "    return torch.rsqrt(x.var(dim=-1, keepdim=True).clamp_min(1e-12))\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def spread_loss(x, cos: torch.Tensor):\n"
                "    mu = x.mean(-1)\n"
                "    var = (x * x).mean(-1) - mu ** 2\n"
                "    sd = torch.sqrt(var)\n"
                "    sin = (1 - cos ** 2) ** 0.5\n"
                "    rms = ((x - mu[..., None]) ** 2).mean(-1).pow(0.5)\n"
                "    return sd + sin + rms\n"
            ),
            lines=(7, 8, 9),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def spread_loss(x, cos: torch.Tensor):\n"
                "    mu = x.mean(-1)\n"
                "    var = (x * x).mean(-1) - mu ** 2\n"
                "    sd = torch.sqrt(var.clamp_min(1e-12))\n"
                "    sin = (1 - cos ** 2).clamp_min(1e-12) ** 0.5\n"
                "    rms = ((x - mu[..., None]) ** 2).mean(-1).clamp_min(1e-12).pow(0.5)\n"
                "    return sd + sin + rms\n"
            ),
        ),
    )
    good = (
        "import math\nimport torch\nimport torch.nn.functional as F\n"
        "def f(x, d_model, eps=1e-5):\n"
        "    a = math.sqrt(d_model) * torch.sqrt(torch.tensor(2.0)) * x.shape[-1] ** 0.5\n"
        "    b = torch.sqrt(x.var(-1) + eps) + torch.rsqrt(x.pow(2).mean(-1) + eps)\n"
        "    c = torch.sqrt(F.softplus(x)) + torch.exp(x).sqrt() + torch.sqrt(x ** 2 + eps)\n"
        "    return a * b * c * torch.sqrt((x - x.mean()).clamp(min=0)) ** 2\n",
        "import torch\n"
        "def f(x, y):\n"
        "    return torch.sqrt((x ** 2).sum(-1)) + torch.sqrt(x ** 2 + y ** 2) + torch.sqrt(x) + x.sum() ** 0.5\n",
        "import torch\n"
        "def f(x, alpha_bar):\n"
        "    return torch.sqrt(1 - alpha_bar) * x / torch.sqrt(x.var(0))\n",
    )

    def root(self, node: cst.CSTNode, kind: str, arg: cst.BaseExpression) -> None:
        ctx = self.ctx
        what = root_hazard(ctx, arg)
        if (
            what is None
            and kind == "sqrt"
            and sum_of_squares(ctx, arg, node) is not None
            and not owned_elsewhere(ctx, self.code, "root-of-sum-of-squares")
        ):
            what = "a sum of squares"
        if what is None or self._is_denominator(node, kind) or is_tested(ctx, arg, ctx.resolve(arg)):
            return
        if is_not_torch(ctx, arg) or value_kind(ctx, node) in ("numpy", "python"):
            return
        edge = self._negative(what, arg)
        note = ""
        if edge is None:
            if kind != "rsqrt":
                note = gradient_note(ctx)
                if note is None or not may_carry_grad(ctx, arg):
                    return  # only the gradient at 0 is at stake: reported where one flows
            why = self._zero(what, arg)
            if why is None:
                if not ctx.strict:
                    return
                why = STRICT_WHY
            edge = f"which is 0 {why}: " + ("Inf there" if kind == "rsqrt" else "an infinite gradient there")
        torch_value = value_kind(ctx, node) == "torch" or is_torch_value(ctx, arg)
        fix = self.fix().replace(arg, with_clamp(arg, EPS)) if torch_value else None
        op = {"sqrt": "`sqrt`", "rsqrt": "`rsqrt`", "pow": "a fractional power"}[kind]
        self.report(node, fix, op=op, what=what, edge=edge, note=note)

    def _negative(self, what: str, arg: cst.BaseExpression) -> Optional[str]:
        """Why the argument goes below 0, a forward NaN wherever the code runs: `E[x^2] - E[x]^2`
        cancels, and `1 - c ** 2` of a cosine computed by hand rounds past 1. None otherwise."""
        ctx = self.ctx
        value = strip_parens(ctx.resolve(arg))
        if what != "a difference" or not isinstance(value, cst.BinaryOperation):
            return None
        right_square = square_base(ctx, ctx.resolve(value.right))
        if right_square is None:
            return None
        if _mean_of_squares_of(ctx, value.left, right_square):
            return "which rounding makes negative (`E[x^2] - E[x]^2` cancels): NaN"
        if number_value(strip_parens(value.left)) is not None and _is_cosine(ctx, right_square):
            return "which is negative once the cosine rounds past 1: NaN"
        return None

    def _zero(self, what: str, arg: cst.BaseExpression) -> Optional[str]:
        """Why the argument reaches 0 for real inputs, or None without evidence."""
        ctx = self.ctx
        if what in ("a mean of squares", "a sum of squares"):
            total = match_call(ctx.imports, strip_parens(ctx.resolve(arg)), "mean", "sum")
            base = square_base(ctx, strip_parens(ctx.resolve(total.input))) if total is not None else None
            return row_evidence(ctx, base, strong=True) if base is not None else None
        if what == "a variance":
            var = match_call(ctx.imports, unwrap_casts(ctx, arg), "var")
            return "for constant data" if var is not None and is_data(ctx, var.input) else None
        return None  # a difference or a sum of unknown terms: that they coincide is no evidence

    def _is_denominator(self, node: cst.CSTNode, kind: str) -> bool:
        """A square root written directly as the divisor of a division: TNL201 reports it (with
        this fix)."""
        if kind != "sqrt":
            return False
        stack = self.ctx.stack
        division = stack[-3] if len(stack) > 2 and isinstance(stack[-2], cst.Arg) else self.ctx.parent
        operands = division_operands(self.ctx, division) if division is not None else None
        return (
            operands is not None
            and operands[1] is node
            and owned_elsewhere(self.ctx, self.code, "root-as-divisor")
        )
