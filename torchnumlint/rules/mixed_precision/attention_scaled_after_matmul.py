"""TNL308 attention-scaled-after-matmul: attention scores scaled after the product, in float16.

`(q @ k.transpose(-2, -1)) * scale` (or `/ math.sqrt(d)`, or `torch.matmul`/`bmm`/`einsum`,
the scaling in the same expression or in the next assignment of the scores' name) whose result
reaches a softmax, in code that runs in float16 (`rules/fp16_code.py`: inside an fp16 autocast, or
reached from one through the project). CUDA autocast runs the matmul in float16, so the unscaled
product leaves float16's range (65504) before the scale applies, and the softmax of an Inf row is
NaN. Measured under the CUDA policy (torch 2.13 CPU, `cuda_policy.py`): 256 channels of
magnitude 16 give q.k = 65536 -> Inf; with activations ~N(0, 16^2), 32 to 34 of 64 self-scores Inf (two seeds);
scaling q first keeps every row finite.

Not reported: a factor that cannot shrink the product (a literal >= 1, a divisor <= 1), scores
of normalised operands (`F.normalize(q)`: cosine attention is bounded), scores that reach no
softmax, code with no fp16 region known to reach it (unless `--strict`), and islands.

The fix moves the scale onto the first operand, `(q * scale) @ k.transpose(-2, -1)`, only when
the scale is a plain number (a literal, `math.sqrt(d)`, a size, `d ** -0.5`, a name or `self.`
attribute bound once to one): then the two are the same product up to rounding wherever the
original is finite, for every value. A scale that may be a tensor gets no fix.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.fp16_code import Product, fp16_reach, product_of
from torchnumlint.rules.mixed_precision.scores import feeds_softmax, normalised, plain_number, scale_value
from torchnumlint.walk import Visitor

# A name that says it is a scale (`self.scale`, `scaling`, `temperature`, `inv_sqrt_d`).
SCALE_NAME = re.compile(r"scal|temperature|(^|_)tau$|sqrt|norm_fact|(^|_)d_?k$|head_dim")


def _atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` in parentheses unless it already binds tighter than any operator."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class AttentionScaledAfterMatmul(Rule):
    code = "TNL308"
    name = "attention-scaled-after-matmul"
    finds = "in fp16 code (an fp16 autocast region reaches it): attention scores scaled after the matmul, `(q @ k.transpose(-2, -1)) * scale`, before their softmax"
    fix_summary = (
        "safe when the scale is a plain number: `(q * scale) @ k.transpose(-2, -1)`; else message (or `F.scaled_dot_product_attention`)"
    )
    message = (
        "attention scores scaled after the matmul in float16 ({where}): `{product}` leaves float16's "
        "range (65504) before the scale applies, and the softmax of Inf is NaN; scale the first operand "
        "before the product, or use `F.scaled_dot_product_attention`"
    )
    rationale = (
        "CUDA autocast runs matmul, bmm and einsum in float16 and softmax in float32: "
        "`(q @ k.transpose(-2, -1)) * scale` computes the unscaled dot products in float16 first, and "
        "they leave its range (65504) before the scale can bring them back. Measured under CUDA's "
        "autocast policy (torch 2.13): 256 channels of magnitude 16 give q.k = 65536, Inf, and the "
        "softmax of that row is NaN; with activations ~N(0, 16^2) over 256 channels, 32 to 34 of 64 "
        "self-scores are Inf (two seeds). Scaling q first (`(q * scale) @ k.transpose(-2, -1)`) keeps them at "
        "4096, finite, and gives the same scores up to rounding; "
        "`F.scaled_dot_product_attention` scales first too. Reported where an fp16 region reaches "
        "the code (the finding cites it) and the scores reach a softmax; the fix is offered when "
        "the scale is a plain number."
    )
    safety = Safety.SAFE
    needs_index = True
    needles = ("softmax", "Softmax")
    pattern = r"@|matmul|bmm|einsum"

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def attend(q, k, v):\n"
                '    with torch.autocast("cuda"):\n'
                "        scale = q.shape[-1] ** -0.5\n"
                "        scores = (q @ k.transpose(-2, -1)) * scale\n"
                "        return scores.softmax(dim=-1) @ v\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def attend(q, k, v):\n"
                '    with torch.autocast("cuda"):\n'
                "        scale = q.shape[-1] ** -0.5\n"
                "        scores = (q * scale) @ k.transpose(-2, -1)\n"
                "        return scores.softmax(dim=-1) @ v\n"
            ),
        ),
        Example(
            bad=(
                "import math\n"
                "\n"
                "import torch\n"
                "import torch.nn.functional as F\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class SelfAttention(nn.Module):\n"
                "    def __init__(self, dim, heads=8):\n"
                "        super().__init__()\n"
                "        self.heads = heads\n"
                "        self.head_dim = dim // heads\n"
                "        self.qkv = nn.Linear(dim, dim * 3)\n"
                "        self.out = nn.Linear(dim, dim)\n"
                "\n"
                "    def forward(self, x):\n"
                "        b, n, c = x.shape\n"
                "        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)\n"
                "        q, k, v = qkv.unbind(0)\n"
                "        scores = torch.matmul(q, k.transpose(-1, -2))\n"
                "        scores = scores / math.sqrt(self.head_dim)\n"
                "        weights = F.softmax(scores, dim=-1)\n"
                "        return self.out((weights @ v).transpose(1, 2).reshape(b, n, c))\n"
                "\n"
                "\n"
                "def train(dim, batches):\n"
                "    model = SelfAttention(dim).cuda()\n"
                "    optimizer = torch.optim.AdamW(model.parameters())\n"
                '    scaler = torch.amp.GradScaler("cuda")\n'
                "    for batch in batches:\n"
                '        with torch.autocast("cuda"):\n'
                "            loss = model(batch).pow(2).mean()\n"
                "        scaler.scale(loss).backward()\n"
                "        scaler.step(optimizer)\n"
                "        scaler.update()\n"
                "        optimizer.zero_grad()\n"
            ),
            lines=(21,),
            fixed=None,
        ),
    )
    good = (
        # the scale applied to q before the product
        "import torch\n"
        "def attend(q, k, v):\n"
        '    with torch.autocast("cuda"):\n'
        "        q = q * q.shape[-1] ** -0.5\n"
        "        return (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v\n",
        # scaled_dot_product_attention scales first
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def attend(q, k, v):\n"
        '    with torch.autocast("cuda"):\n'
        "        return F.scaled_dot_product_attention(q, k, v)\n",
        # a float32 island: autocast off, float32 operands
        "import torch\n"
        "def attend(q, k, v):\n"
        '    with torch.autocast("cuda"):\n'
        '        with torch.autocast("cuda", enabled=False):\n'
        "            scores = (q.float() @ k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5\n"
        "            return scores.softmax(dim=-1) @ v.float()\n",
        # bfloat16 autocast: float32's range
        "import torch\n"
        "def attend(q, k, v):\n"
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "        scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5\n"
        "        return scores.softmax(dim=-1) @ v\n",
        # cosine attention: normalised operands keep |q.k| <= 1
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def attend(q, k, v, logit_scale):\n"
        '    with torch.autocast("cuda"):\n'
        "        scores = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * logit_scale\n"
        "        return scores.softmax(dim=-1) @ v\n",
        # no softmax: a bilinear score for a loss, not attention
        'import torch\ndef similarity(a, b):\n    with torch.autocast("cuda"):\n        return (a @ b.transpose(-2, -1)) * 0.07\n',
        # a sharpening factor cannot be moved to prevent anything: it is not the order
        "import torch\n"
        "def attend(q, k, v):\n"
        '    with torch.autocast("cuda"):\n'
        "        return ((q @ k.transpose(-2, -1)) * 2.0).softmax(dim=-1) @ v\n",
        # no fp16 region reaches it: the model is handed in, this is never known to run in fp16
        "import torch\n"
        "def attend(q, k, v):\n"
        "    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5\n"
        "    return scores.softmax(dim=-1) @ v\n",
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Multiply, cst.Divide)):
            self._scaled(node)

    def _scaled(self, node: cst.BinaryOperation) -> None:
        found = self._product_and_scale(node)
        if found is None:
            return
        product, scale, inline = found
        if normalised(self.ctx, product.first) or normalised(self.ctx, product.second):
            return
        if not feeds_softmax(self.ctx, node):
            return
        if _fallback_of_sdpa(self.ctx):
            return  # `if has_sdpa: F.scaled_dot_product_attention(...) else: <this>`: taken by an old torch only
        reach = fp16_reach(self.ctx)
        if reach is None and not self.ctx.strict:
            return
        where = reach.text if reach is not None else "strict mode: no fp16 region is known to reach it"
        fix = self._fix(node, product, scale) if inline else None
        bare = product.node.with_changes(lpar=[], rpar=[])
        self.report(node, fix, where=where, product=self.ctx.module.code_for_node(bare))

    def _product_and_scale(self, node: cst.BinaryOperation) -> Optional[Tuple[Product, cst.BaseExpression, bool]]:
        """(the product, the scale, whether the product is written inline) of `product * scale`,
        `scale * product` or `product / divisor`, where the scale can only shrink the product; the
        product may also be a name bound once to one (`s = q @ k.T`; `s = s / d`)."""
        divide = isinstance(node.operator, cst.Divide)
        sides = [(node.left, node.right)] if divide else [(node.left, node.right), (node.right, node.left)]
        for side, scale in sides:
            product, inline = product_of(self.ctx, side), True
            if product is None and isinstance(side, cst.Name):
                binding = self.ctx.binding(side)
                value = binding.value if binding is not None else None
                product, inline = (product_of(self.ctx, value) if value is not None else None), False
            if product is None or not self._shrinks(scale, divide):
                continue
            return product, scale, inline
        return None

    def _shrinks(self, scale: cst.BaseExpression, divide: bool) -> bool:
        """A scale that brings the product down: a number below 1 (a divisor above 1), a plain
        number we cannot evaluate, or a name that says it is a scale."""
        value = scale_value(self.ctx, scale)
        if value is not None:
            return value > 1 if divide else 0 < abs(value) < 1
        if plain_number(self.ctx, scale):
            return True
        text = _last_name(scale)
        return text is not None and SCALE_NAME.search(text.lower()) is not None

    def _fix(self, node: cst.BinaryOperation, product: Product, scale: cst.BaseExpression):
        """`(a @ b) * s` -> `(a * s) @ b` (`/ s` likewise), when `s` is a plain number and the
        result is not scaled again (a second pass would move that factor too)."""
        parent = self.ctx.parent
        if not plain_number(self.ctx, scale) or (
            isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Multiply, cst.Divide))
        ):
            return None
        operator = cst.Divide() if isinstance(node.operator, cst.Divide) else cst.Multiply()
        if isinstance(scale, cst.BinaryOperation) and not isinstance(scale.operator, cst.Power):
            scale = _atom(scale)  # `q / (a * b)`, not `q / a * b`
        moved = cst.BinaryOperation(left=_atom(product.first), operator=operator, right=scale)
        if not product.as_argument:  # `(q * s) @ k`, `(q * s).matmul(k)`; an argument needs none
            moved = moved.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        new = product.with_first(moved).with_changes(lpar=node.lpar, rpar=node.rpar)
        return self.fix().replace(node, new)


def _last_name(expr: cst.BaseExpression) -> Optional[str]:
    """`scale` of `self.scale`, `math.sqrt` of `math.sqrt(d)`: the name a reader sees."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


def _fallback_of_sdpa(ctx) -> bool:
    """Whether the node being visited is in one branch of an `if` whose other branch calls
    `F.scaled_dot_product_attention`: the hand-written attention kept for a torch without it (the
    flash/SDPA switch of nanoGPT, LightGlue), dead on any torch with SDPA, where the other
    branch runs (an independent reading of the corpus judged such a finding unreachable)."""
    for at, node in enumerate(ctx.stack):
        if not isinstance(node, cst.If):
            continue
        inside = ctx.stack[at + 1] if at + 1 < len(ctx.stack) else None
        branches = [node.body] + ([node.orelse] if node.orelse is not None else [])
        others = [b for b in branches if b is not inside]
        if len(others) < len(branches) and any(_calls_sdpa(ctx, other) for other in others):
            return True
    # `if flash: return F.scaled_dot_product_attention(...)` earlier in the same block
    for at, node in enumerate(ctx.stack[:-1]):
        if isinstance(node, cst.IndentedBlock):
            statement = ctx.stack[at + 1]
            before = node.body[: next((i for i, s in enumerate(node.body) if s is statement), 0)]
            if any(isinstance(s, cst.If) and _returns_sdpa(ctx, s.body) for s in before):
                return True
    return False


def _returns_sdpa(ctx, block: cst.BaseSuite) -> bool:
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
    returns = isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in last.body)
    return returns and _calls_sdpa(ctx, block)


def _calls_sdpa(ctx, tree: cst.CSTNode) -> bool:
    found = []

    class _Calls(Visitor):
        def visit_Call(self, call: cst.Call) -> None:
            qual = ctx.qualname(call.func)
            if qual == "torch.nn.functional.scaled_dot_product_attention" or (
                isinstance(call.func, cst.Attribute) and call.func.attr.value == "scaled_dot_product_attention"
            ):
                found.append(call)

    _Calls().walk(tree)
    return bool(found)
