"""TNL210 atan-of-ratio: `torch.atan(y / x)` (`arctan`, method forms, through a name) of the two
components of a vector: `v[..., 1] / v[..., 0]`, `dy / dx`, `sin / cos`, `imag / real`. At the
origin the ratio is 0 / 0 and the angle NaN; where x = 0 the forward is +-pi/2 but the gradient
NaN (0 * inf); where x < 0 the angle is off by pi. `torch.atan2(y, x)` has none of these.

A vector's components are the evidence (their angle is meant, every quadrant, and a component
of 0 is an axis); any other ratio is reported in strict mode only (a slope whose half-range
angle is meant, a ratio of positive sizes).
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.divisors import division_operands
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch
from torchnumlint.rules.guarding import is_guarded
from torchnumlint.rules.syntax import same_code, strip_parens
from torchnumlint.rules.calls import make_op, match_call

_ATAN = make_op("atan", {"torch.atan", "torch.arctan"}, "atan")
_ARCTAN = make_op("arctan", set(), "arctan")
# names of the two components of a 2-D vector, y's word first
_PAIRS = (("y", "x"), ("sin", "cos"), ("imag", "real"), ("im", "re"), ("v", "u"))


class AtanOfRatio(Rule):
    code = "TNL210"
    name = "atan-of-ratio"
    finds = "`torch.atan(y / x)` of a vector's two components (`v[..., 1] / v[..., 0]`, `dy / dx`, `sin / cos`, `imag / real`): NaN at the origin, NaN gradient where x = 0, off by pi where x < 0"
    fix_summary = "unsafe: `torch.atan2(y, x)`"
    message = "`atan` of a ratio of {what}: NaN at the origin (0 / 0), a NaN gradient where x = 0, and the angle off by pi where x < 0{note}; use `torch.atan2(y, x)`"
    rationale = (
        "`atan(y / x)` is the angle of the vector (x, y) only in the right half-plane. Measured on "
        "torch 2.13: at (0, 0) the forward is NaN; at (0, 1) it is pi/2 but both gradients are NaN "
        "(atan's derivative 1 / (1 + inf^2) = 0 times the ratio's -y / x^2 = inf); at (-1, 1) it "
        "gives -0.785 where the angle is 2.356. `torch.atan2(y, x)` gives 0, pi/2 and 2.356 there, "
        "with finite gradients (0 at the origin). The rewrite changes every angle with x < 0 by "
        "pi: unsafe. Reported by default where the ratio is of a vector's two components "
        "(`v[..., 1] / v[..., 0]`, `dy / dx`, `sin / cos`); other ratios only in strict mode. "
        "(`torch.sqrt(x ** 2 + y ** 2)` overflows in float32 only past 1.8e19 (`x ** 2` is inf "
        "there; `torch.hypot` is finite to 3.4e38) and hypot's gradient is NaN at 0 as the root's: "
        "not reported.)"
    )
    safety = Safety.UNSAFE
    needles = ("atan", "arctan")
    examples = (
        Example(
            bad=("import torch\n\n\ndef heading(vel):\n    return torch.atan(vel[..., 1] / vel[..., 0])\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef heading(vel):\n    return torch.atan2(vel[..., 1], vel[..., 0])\n"),
        ),
    )
    good = (
        "import torch\n\n\ndef heading(vel):\n    return torch.atan2(vel[..., 1], vel[..., 0])\n",
        "import math\nimport torch\n\n\ndef fov(focal, width, x):\n    return 2 * math.atan(width / (2 * focal)) + torch.atan(x)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        match = match_call(self.ctx.imports, node, _ATAN, _ARCTAN)
        if match is None or not match.fully_known:
            return
        ctx = self.ctx
        resolved = ctx.resolve(match.input)
        ratio = strip_parens(resolved)
        operands = division_operands(ctx, ratio)
        if operands is None:
            return
        y, x = operands
        if (is_not_torch(ctx, y) and is_not_torch(ctx, x)) or is_guarded(ctx, x):
            return
        what = _components(ctx, y, x)
        note = ""
        if what is None:
            if not ctx.strict:
                return
            what, note = "two values", f" ({STRICT_WHY})"
        fix = None
        if resolved is match.input or not ctx.rebound_between(resolved, node):  # y, x read here
            fix = self.fix()
            code = ctx.module.code_for_node
            atan2 = f"{code(fix.ref('torch.atan2'))}({code(strip_parens(y))}, {code(strip_parens(x))})"
            fix.replace(node, cst.parse_expression(atan2))
        self.report(node, fix, what=what, note=note)


def _components(ctx, y: cst.BaseExpression, x: cst.BaseExpression) -> Optional[str]:
    """How the message names y and x when they are a vector's two components, else None."""
    y, x = strip_parens(y), strip_parens(x)
    if _indexed_pair(ctx, y, x):
        return "two components of one tensor"
    words = (_words(y), _words(x))
    if words[0] is None or words[1] is None:
        return None
    for first, second in _PAIRS:
        if _pairs(words[0], words[1], first, second):
            return f"a vector's components (`{ctx.module.code_for_node(y)}`, `{ctx.module.code_for_node(x)}`)"
    return None


def _indexed_pair(ctx, y: cst.BaseExpression, x: cst.BaseExpression) -> bool:
    """`v[..., 1] / v[..., 0]`, `d[:, 1] / d[:, 0]`: one tensor, the same index but its last
    position, two different integers there."""
    if not (isinstance(y, cst.Subscript) and isinstance(x, cst.Subscript)) or not same_code(ctx, y.value, x.value):
        return False
    if len(y.slice) != len(x.slice) or not y.slice:
        return False
    *rest_y, last_y = y.slice
    *rest_x, last_x = x.slice
    if any(ctx.module.code_for_node(a) != ctx.module.code_for_node(b) for a, b in zip(rest_y, rest_x)):
        return False
    values = [e.slice.value for e in (last_y, last_x) if isinstance(e.slice, cst.Index)]
    return (
        len(values) == 2
        and all(isinstance(v, cst.Integer) for v in values)
        and (
            values[0].value != values[1].value  # type: ignore[attr-defined]  # both are Integers: asked just before
        )
    )


def _words(expr: cst.BaseExpression) -> Optional[Tuple[str, ...]]:
    """The words of a name or attribute (`dy`, `vel_y`, `self.sin_t`), lower case."""
    if isinstance(expr, cst.Attribute):
        expr = expr.attr
    if not isinstance(expr, cst.Name):
        return None
    return tuple(w for w in re.split(r"_+", expr.value.lower()) if w)


def _pairs(y: Tuple[str, ...], x: Tuple[str, ...], first: str, second: str) -> bool:
    """The two names differ only where one says `first` and the other `second` (`dy`/`dx`,
    `vel_y`/`vel_x`, `sin_a`/`cos_a`), a leading `d` allowed on the single letters."""
    if len(y) != len(x):
        return False
    differing = [(a, b) for a, b in zip(y, x) if a != b]
    if len(differing) != 1:
        return False
    a, b = differing[0]
    return (a, b) == (first, second) or (a, b) == ("d" + first, "d" + second)
