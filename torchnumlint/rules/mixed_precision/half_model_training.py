"""TNL304 half-model-training: a module cast to float16 (`model.half()`, `.to(torch.float16)`,
`.to(dtype=torch.float16)`, `Net().half()`) that an optimizer then trains (`torch.optim.X(
model.parameters())`) in the same scope, after the cast.

Everything then lives in float16: the weights (an update below a weight's spacing vanishes), the
gradients, the optimizer's state, and every intermediate value, so a loss above 65504 is Inf
(measured on torch 2.13, CPU: `mse_loss` of a `Linear(64, 1).half()` against targets of 300 is
inf, where the same float32 model gives 90067). Mixed precision keeps float32 master weights and
casts per op (`torch.autocast` with a `GradScaler`), or uses bfloat16, whose range is float32's.

Left alone: a cast with no optimizer after it in the scope (inference, export), a cast straight
back (`model.half().float()`), an optimizer over another module's parameters, and a cast to any
other dtype (bfloat16 trains). A guide: the rewrite to autocast touches the whole training loop.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.imports import dotted
from torchnumlint.walk import Visitor

_FLOAT16 = frozenset({"torch.float16", "torch.half"})


class HalfModelTraining(Rule):
    code = "TNL304"
    name = "half-model-training"
    finds = (
        "`model.half()` / `.to(torch.float16)` on a module that an optimizer then trains "
        "(`torch.optim.X(model.parameters())` after the cast): float16 weights, gradients and state"
    )
    fix_summary = "message (float32 weights under `torch.autocast` with a `GradScaler`, or bfloat16)"
    message = (
        "`{model}` is cast to float16 ({cast}) and then trained by `{optimizer}` on line {line}: weights, "
        "gradients and the optimizer's state all live in float16 (a loss above 65504 is Inf, an update "
        "below a weight's spacing vanishes); keep float32 weights under `torch.autocast` with a "
        "`GradScaler`, or use bfloat16"
    )
    rationale = (
        "`model.half()` makes every parameter, gradient, optimizer state and activation float16. "
        "Measured on torch 2.13 (CPU): `mse_loss` of `nn.Linear(64, 1).half()` against targets of "
        "300 is inf, where the same float32 model gives 90067 (autocast computes the loss in "
        "float32: the catalogue's 90320.8). Small updates vanish too: a weight of 1.0 in float16 "
        "does not move for any update below 4.9e-4. Mixed precision keeps float32 master weights "
        "and casts per op under `torch.autocast(device, dtype=torch.float16)` with a `GradScaler`, "
        "or trains in bfloat16, whose range is float32's. No rewrite is offered: the change touches "
        "the whole training loop."
    )
    safety = Safety.GUIDE
    # off until a precision study earns it a default: its 3 corpus findings are fairseq's tests of
    # an fp16 EMA, float16 on purpose (docs/precision.md)
    default = False
    needles = ("half", "float16")
    pattern = r"optim"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def train_step(x, y):\n"
                "    model = nn.Linear(64, 1).half()\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)\n"
                "    loss = nn.functional.mse_loss(model(x.half()), y.half())\n"
                "    loss.backward()\n"
                "    optimizer.step()\n"
                "    return loss\n"
            ),
            lines=(6,),
            fixed=None,
        ),
    )
    good = (
        # float32 master weights: the same step in float32 (autocast would keep the loss in float32)
        "import torch\n"
        "from torch import nn\n"
        "\n"
        "\n"
        "def train_step(x, y):\n"
        "    model = nn.Linear(64, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)\n"
        "    loss = nn.functional.mse_loss(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    return loss\n",
        # a half model for inference only
        "import torch\n"
        "def export(model, x):\n"
        "    model = model.half().eval()\n"
        "    with torch.no_grad():\n"
        "        return model(x.half())\n",
        # bfloat16 trains
        "import torch\n"
        "def fit(model, batches):\n"
        "    model = model.to(torch.bfloat16)\n"
        "    opt = torch.optim.AdamW(model.parameters())\n"
        "    for x in batches:\n"
        "        model(x).sum().backward()\n"
        "        opt.step()\n",
    )

    def visit_Module(self, node: cst.Module) -> None:
        self._scope(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scope(node)

    def _scope(self, scope: cst.CSTNode) -> None:
        """Casts, then optimizers over the cast module's parameters, in the order they are written."""
        ctx = self.ctx
        events = _Events(ctx, scope)
        cast: Dict[str, Tuple[cst.CSTNode, str]] = {}
        for kind, name, node, text in events.found:
            if kind == "cast":
                cast.setdefault(name, (node, text))
            elif kind == "uncast":
                cast.pop(name, None)
            elif name in cast:
                at, how = cast.pop(name)
                span = ctx.positions.get(node)
                self.report(at, None, model=name, cast=how, optimizer=text,
                            line=span.start.line if span is not None else "?")


class _Events(Visitor):
    """In one scope (not its nested functions or classes): casts of a name to float16, casts of it
    back or elsewhere, and optimizers built over a name's `.parameters()`."""

    def __init__(self, ctx, scope: cst.CSTNode) -> None:
        super().__init__()
        self.ctx, self.scope = ctx, scope
        self.found: List[Tuple[str, str, cst.CSTNode, str]] = []
        self.walk(scope)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is not self.scope and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = _name(node.targets[0].target)
            if target is not None:
                self._cast_of(node.value, target, node)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            receiver = _receiver(node.value)
            if receiver is not None:
                self._cast_of(node.value, receiver, node)
        if isinstance(node, cst.Call):
            self._optimizer(node)
        return True

    def _cast_of(self, value: cst.BaseExpression, name: str, at: cst.CSTNode) -> None:
        dtype = self._last_cast(value)
        if dtype is not None:
            text = self.ctx.module.code_for_node(value)
            self.found.append(("cast" if dtype == "float16" else "uncast", name, at, text))

    def _last_cast(self, value: cst.BaseExpression) -> Optional[str]:
        """The dtype the outermost cast of a call chain gives: `.half()` float16, `.float()`,
        `.bfloat16()`, `.double()` another; `.to(...)` by its dtype argument; None for no cast."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            if method == "half":
                return "float16"
            if method in ("float", "bfloat16", "double"):
                return "other"
            if method == "to":
                dtypes = [self.ctx.qualname(arg.value) for arg in value.args
                          if arg.keyword is None or arg.keyword.value == "dtype"]
                if any(d in _FLOAT16 for d in dtypes):
                    return "float16"
                if any(d is not None and d.startswith("torch.") and d not in _FLOAT16 for d in dtypes):
                    return "other"
            value = value.func.value
        return None

    def _optimizer(self, call: cst.Call) -> None:
        qual = self.ctx.qualname(call.func)
        if qual is None or not qual.startswith("torch.optim.") or not call.args:
            return
        first = call.args[0].value
        if isinstance(first, cst.Call) and isinstance(first.func, cst.Name) and first.func.value == "list" and first.args:
            first = first.args[0].value
        if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) and first.func.attr.value == "parameters":
            owner = _name(first.func.value)
            if owner is not None:
                self.found.append(("optimizer", owner, call, self.ctx.module.code_for_node(call.func)))


def _name(expr: cst.BaseExpression) -> Optional[str]:
    """`model` or `self.model` as written; None for anything else."""
    try:
        text = dotted(expr)
    except TypeError:
        return None
    return text if text.count(".") <= 1 else None


def _receiver(call: cst.Call) -> Optional[str]:
    """The name a bare cast statement changes in place (`model.half()`)."""
    func = call.func
    while isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        func = func.value.func
    return _name(func.value) if isinstance(func, cst.Attribute) else None
