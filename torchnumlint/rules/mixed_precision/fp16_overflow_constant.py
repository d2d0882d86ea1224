"""TNL305 fp16-overflow-constant: a fill constant beyond float16's range on a float16 tensor.

`scores.masked_fill(mask, -1e9)` (also `masked_fill_`, `torch.masked_fill`, a name bound once to
the constant, `torch.finfo(torch.float32).min`) where `scores` is float16 (`fp16_code.fp16_value`:
a matmul, a linear or conv layer, a `.half()`) in code an fp16 region reaches
(`fp16_code.fp16_reach`). Measured (torch 2.13, CUDA's autocast policy on the CPU): the fill
raises "value cannot be converted to type c10::Half without overflow" for any |c| > 65504 (-65504
fills, -65505 raises), float32's finfo min too.

The fix fills with `torch.finfo(scores.dtype).min` (`.max` for a positive constant), which every
dtype holds. SAFE where the filled scores go to a softmax (the masked entries are 0 after it either
way); UNSAFE elsewhere (the filled value itself changes). Without float16 evidence for the
tensor the rule reports only in `--strict` mode. In the forward of a project module reached from
an fp16 region, TNL301 leaves this hazard to TNL305 when both run (`ownership.py`).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.autocast import FP16_MAX, source_value
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.fp16_code import fp16_reach, fp16_value
from torchnumlint.rules.mixed_precision.scores import feeds_softmax
from torchnumlint.rules.bindings import is_plain

FILLS = frozenset({"masked_fill", "masked_fill_"})
FINFO_FP32 = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})


class Fp16OverflowConstant(Rule):
    code = "TNL305"
    name = "fp16-overflow-constant"
    finds = "in fp16 code: `masked_fill` with a constant beyond 65504 (`-1e9`, float32's `finfo.min`) on a float16 tensor (a matmul's, a linear layer's, a `.half()`)"
    fix_summary = "safe before a softmax (else unsafe): `torch.finfo(scores.dtype).min`"
    message = (
        "`{fill}` with {value} on a float16 tensor ({why}) under fp16 ({where}): {value} is beyond "
        "float16's range (65504) and the fill raises an overflow error; use `torch.finfo({dtype_of}.dtype).{end}`"
    )
    rationale = (
        "float16 holds values up to 65504. Under CUDA autocast a matmul, a linear or a convolution "
        'gives float16 scores, and `scores.masked_fill(mask, -1e9)` then raises "value cannot be '
        'converted to type c10::Half without overflow" (measured, torch 2.13: -65504 fills, -65505 '
        "raises; `torch.finfo(torch.float32).min` raises too). Fill with `torch.finfo(scores.dtype).min`, "
        "the most negative value of whatever dtype the scores have: after a softmax the masked "
        "entries are 0 as before."
    )
    safety = Safety.SAFE
    needs_index = True
    needles = ("masked_fill",)

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def attend(q, k, v, mask):\n"
                '    with torch.autocast("cuda"):\n'
                "        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
                "        scores = scores.masked_fill(~mask, -1e9)\n"
                "        return scores.softmax(dim=-1) @ v\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def attend(q, k, v, mask):\n"
                '    with torch.autocast("cuda"):\n'
                "        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
                "        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"
                "        return scores.softmax(dim=-1) @ v\n"
            ),
        ),
    )
    good = (
        # the dtype's own minimum
        "import torch\n"
        "def attend(q, k, v, mask):\n"
        '    with torch.autocast("cuda"):\n'
        "        scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, torch.finfo(q.dtype).min)\n"
        "        return scores.softmax(dim=-1) @ v\n",
        # float32 scores: the constant fits
        "import torch\n"
        "def attend(q, k, v, mask):\n"
        '    with torch.autocast("cuda"):\n'
        "        scores = (q @ k.transpose(-2, -1)).float().masked_fill(~mask, -1e9)\n"
        "        return scores.softmax(dim=-1) @ v.float()\n",
        # no fp16 region
        "import torch\n"
        "def attend(q, k, v, mask):\n"
        "    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, -1e9)\n"
        "    return scores.softmax(dim=-1) @ v\n",
        # within float16's range
        "import torch\n"
        "def attend(q, k, v, mask):\n"
        '    with torch.autocast("cuda"):\n'
        "        scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, -1e4)\n"
        "        return scores.softmax(dim=-1) @ v\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qual = self.ctx.qualname(func)
        if qual == "torch.masked_fill":
            receiver, at = (node.args[0].value if node.args else None), 2
        elif isinstance(func, cst.Attribute) and func.attr.value in FILLS and qual is None:
            receiver, at = func.value, 1
        else:
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "value"), None)
        arg = arg or (positional[at] if len(positional) > at else None)
        value = self._constant(arg.value) if arg is not None else None
        if arg is None or receiver is None or value is None or not FP16_MAX < abs(value) < float("inf"):
            return
        why = fp16_value(self.ctx, receiver)
        reach = fp16_reach(self.ctx)
        if (why is None or reach is None) and not self.ctx.strict:
            return
        end = "min" if value < 0 else "max"
        fix = None
        if is_plain(receiver) and isinstance(receiver, (cst.Name, cst.Attribute)):
            fix = self.fix(Safety.SAFE if feeds_softmax(self.ctx, node) else Safety.UNSAFE)
            fix.replace(
                arg.value,
                cst.parse_expression(
                    f"{self.ctx.module.code_for_node(fix.ref('torch.finfo'))}({self.ctx.module.code_for_node(receiver)}.dtype).{end}"
                ),
            )
        shown = self.ctx.module.code_for_node(arg.value)
        self.report(
            node,
            fix,
            fill=func.attr.value if isinstance(func, cst.Attribute) else "masked_fill",
            value=shown,
            why=why or "strict mode: not known to be float16",
            where=reach.text if reach else "strict mode",
            dtype_of=self.ctx.module.code_for_node(receiver),
            end=end,
        )

    def _constant(self, expr: cst.BaseExpression) -> Optional[float]:
        """The number a fill value is: a literal (`-1e9`, `float("-1e9")`), a name bound once to
        one, or `torch.finfo(torch.float32).min` / `.max` (negated too)."""
        expr = self.ctx.resolve(expr)
        sign = 1.0
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            sign, expr = -1.0, expr.expression
        if (
            isinstance(expr, cst.Attribute)
            and expr.attr.value in ("min", "max")
            and isinstance(expr.value, cst.Call)
            and self.ctx.qualname(expr.value.func) == "torch.finfo"
            and expr.value.args
            and self.ctx.qualname(expr.value.args[0].value) in FINFO_FP32
        ):
            return sign * (-3.4028234663852886e38 if expr.attr.value == "min" else 3.4028234663852886e38)
        value = source_value(self.ctx.module.code_for_node(expr), None)
        return sign * value if isinstance(value, float) else None
