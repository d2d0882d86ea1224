"""TNL303 eps-below-fp16: an eps that float16 cannot hold, guarding a float16 value.

`x / (t + 1e-8)`, `torch.sqrt(t + 1e-12)`, `torch.log(t + 1e-10)`, `t.clamp_min(1e-12)` used as a
divisor, where `t` is float16 (`fp16_code.fp16_value`: a matmul's, a float16 layer's, a `.half()`,
through reductions that keep the dtype) in code an fp16 region reaches (`fp16_code.fp16_reach`).
Measured (torch 2.13): below 2.98e-8 the eps rounds to 0.0 in float16, so it guards nothing (0/0 =
NaN, log 0 = -inf, the gradient of sqrt at 0 Inf); from 2.98e-8 up to 1.53e-5 it is a subnormal
whose reciprocal, 1/eps > 65504, is Inf (only a division suffers that: a root or log of a
subnormal is finite). The eps is a literal, a name or parameter default bound to one, or
`self.eps` set from one in `__init__`.

The fix, where the eps is a literal, raises it to float16's smallest normal,
`torch.finfo(torch.float16).tiny` (6.1e-5): the guarded value moves by at most that (UNSAFE), and
the gradient where the value is 0, 1/eps, is 16384 instead of Inf. Computing only the guarded
value in float32 (`t.float() + 1e-8`) is not enough: the forward is finite, but the gradient that
flows back into the float16 `t` is 1/eps = 1e8, Inf in float16 (measured with the reproduction). In the forward of a project module reached from an fp16 region, TNL301 leaves
these sites to TNL303 when both run (`ownership.py`).
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.autocast import FP16_INF_RECIPROCAL, FP16_ROUNDS_TO_ZERO
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.fp16_code import fp16_reach, fp16_value
from torchnumlint.rules.bindings import all_params

ROOTS_LOGS = frozenset({"sqrt", "rsqrt", "log", "log2", "log10"})
CLAMPS = frozenset({"clamp", "clamp_min", "clip"})


def eps_text(eps: float) -> str:
    """Which of the two float16 failures of a small eps applies."""
    if eps < FP16_ROUNDS_TO_ZERO:
        return f"{eps:g} rounds to 0 in float16 (below 2.98e-8) and guards nothing"
    return f"{eps:g} is a float16 subnormal whose reciprocal is Inf (from 2.98e-8 up to 1.53e-5)"


class EpsBelowFp16(Rule):
    code = "TNL303"
    name = "eps-below-fp16"
    finds = "in fp16 code: an eps below 1.53e-5 (`1e-8`, `1e-12`) guarding a float16 value (`x / (t + eps)`, `sqrt`/`log(t + eps)`, `clamp_min(eps)`): 0 in float16, or a subnormal whose reciprocal is Inf"
    fix_summary = "unsafe: `torch.finfo(torch.float16).tiny`"
    message = (
        "eps {eps}; `{value}` is float16 here ({why}) under fp16 ({where}): use an eps of at least "
        "`torch.finfo(torch.float16).tiny` (6.1e-5), whose reciprocal float16 holds"
    )
    rationale = (
        "float16's smallest subnormal is 6e-8 and its smallest normal 6.1e-5. An eps below 2.98e-8 "
        "rounds to 0.0 in float16 (measured, torch 2.13: fp16(1e-8) == 0), so `x / (t + 1e-8)` is 0/0 "
        "= NaN where t is 0 and `log(t + 1e-10)` is -inf; an eps from 2.98e-8 up to 1.53e-5 is a "
        "subnormal whose reciprocal is Inf (1 / fp16(1e-5) = inf), so a division by it overflows. "
        "Under CUDA autocast the value `t` is float16 when a matmul, a linear or a convolution made "
        "it, and `t + eps` is computed in float16 before any log or root upcasts. Use an eps float16 "
        "holds, `torch.finfo(torch.float16).tiny` (6.1e-5): the gradient at 0, 1/eps, is then 16384, "
        "not Inf (a float32 island around `t + eps` alone leaves that gradient Inf in float16)."
    )
    safety = Safety.UNSAFE
    needs_index = True
    needles = ("e-",)
    pattern = r"\de-(0?[5-9]|[1-9]\d)"

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def peak_normalize(x, w):\n"
                '    with torch.autocast("cuda"):\n'
                "        h = x @ w\n"
                "        return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-8)\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def peak_normalize(x, w):\n"
                '    with torch.autocast("cuda"):\n'
                "        h = x @ w\n"
                "        return h / (h.abs().amax(dim=-1, keepdim=True) + torch.finfo(torch.float16).tiny)\n"
            ),
        ),
    )
    good = (
        # the whole normalisation in a float32 island
        "import torch\n"
        "def peak_normalize(x, w):\n"
        '    with torch.autocast("cuda"):\n'
        "        h = x @ w\n"
        '        with torch.autocast("cuda", enabled=False):\n'
        "            h = h.float()\n"
        "            return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-8)\n",
        # an eps float16 holds
        "import torch\n"
        "def peak_normalize(x, w):\n"
        '    with torch.autocast("cuda"):\n'
        "        h = x @ w\n"
        "        return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-4)\n",
        # a sum runs in float32 under CUDA autocast
        "import torch\n"
        "def share(x, w):\n"
        '    with torch.autocast("cuda"):\n'
        "        h = (x @ w).relu()\n"
        "        return h / (h.sum(dim=-1, keepdim=True) + 1e-8)\n",
        # no fp16 region
        "import torch\ndef peak_normalize(x, w):\n    h = x @ w\n    return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-8)\n",
        # a subnormal eps under a root is still a guard (the root of a subnormal is finite)
        "import torch\n"
        "def scale(x, w):\n"
        '    with torch.autocast("cuda"):\n'
        "        h = x @ w\n"
        "        return torch.sqrt(h.abs().amax(dim=-1) + 1e-6)\n",
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self._guard(node.right, division=True)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qual = self.ctx.qualname(func)
        name = qual.rsplit(".", 1)[-1] if qual and qual.startswith("torch.") else None
        if name is None and isinstance(func, cst.Attribute) and qual is None:
            name = func.attr.value
            inner: Optional[cst.BaseExpression] = func.value
        else:
            inner = node.args[0].value if node.args else None
        if name in ROOTS_LOGS and inner is not None:
            self._guard(inner, division=False)

    def _guard(self, expr: cst.BaseExpression, division: bool) -> None:
        found = self._eps_sum(expr)
        if found is None:
            return
        value, eps_node, eps = found
        if eps >= FP16_INF_RECIPROCAL or (not division and eps >= FP16_ROUNDS_TO_ZERO):
            return
        why = fp16_value(self.ctx, value)
        reach = fp16_reach(self.ctx)
        if (why is None or reach is None) and not self.ctx.strict:
            return
        fix = None
        if isinstance(eps_node, (cst.Float, cst.Integer)):
            fix = self.fix()
            finfo = self.ctx.module.code_for_node(fix.ref("torch.finfo"))
            half = self.ctx.module.code_for_node(fix.ref("torch.float16"))
            fix.replace(eps_node, cst.parse_expression(f"{finfo}({half}).tiny"))
        code = self.ctx.module.code_for_node
        self.report(
            eps_node,
            fix,
            eps=eps_text(eps),
            value=code(value),
            why=why or "strict mode: not known to be float16",
            where=reach.text if reach else "strict mode",
        )

    def _eps_sum(self, expr: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression, float]]:
        """(value, eps node, eps) of `value + eps` / `eps + value`, or of `value.clamp_min(eps)`."""
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            for eps_node, value in ((expr.right, expr.left), (expr.left, expr.right)):
                eps = self._small(eps_node)
                if eps is not None:
                    return value, eps_node, eps
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in CLAMPS:
            floor = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "min"), None)
            if floor is None and expr.args and expr.args[0].keyword is None:
                floor = expr.args[0].value
            eps = self._small(floor) if floor is not None else None
            if eps is not None:
                return expr.func.value, floor, eps  # type: ignore[return-value]  # a method call here: its func is an Attribute
        return None

    def _small(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[float]:
        """A positive number below 1.53e-5: a literal, a name bound once to one, a parameter
        defaulting to one, `self.eps` set in `__init__` from either."""
        if isinstance(expr, (cst.Float, cst.Integer)):
            value = float(expr.evaluated_value)
            return value if 0 < value < FP16_INF_RECIPROCAL else None
        if depth > 3 or not isinstance(expr, (cst.Name, cst.Attribute)):
            return None
        binding = self.ctx.binding(expr)
        if binding is not None and binding.value is not None:
            if isinstance(expr, cst.Attribute) and isinstance(binding.value, cst.Name):
                return _param_default(binding.value.value, self.ctx)
            return self._small(binding.value, depth + 1)
        return _param_default(expr.value, self.ctx) if isinstance(expr, cst.Name) else None


def _param_default(name: str, ctx) -> Optional[float]:
    """The small number parameter `name` defaults to, in the enclosing function or `__init__`."""
    funcs = [ctx.enclosing(cst.FunctionDef)]
    cls = ctx.enclosing(cst.ClassDef)
    if isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock):
        funcs += [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"]
    for func in funcs:
        if not isinstance(func, cst.FunctionDef):
            continue
        for param in all_params(func.params):
            if param.name.value == name and isinstance(param.default, (cst.Float, cst.Integer)):
                value = float(param.default.evaluated_value)
                return value if 0 < value < FP16_INF_RECIPROCAL else None
    return None
