"""TNL304 half-model-training: a module cast to float16 (`model.half()`, `.to(torch.float16)`,
`.to(dtype=torch.float16)`, `Net().half()`) that a plain `torch.optim` optimizer then trains in the
same scope, or a float16 copy of a model kept as a weight average with a decay close to 1.

Training: everything then lives in float16: the weights (an update below a weight's spacing
vanishes), the gradients, the optimizer's state, and every intermediate value, so a loss above
65504 is Inf (measured on torch 2.13, CPU: `mse_loss` of a `Linear(64, 1).half()` against targets
of 300 is inf, where the same float32 model gives 90067). Mixed precision keeps float32 master
weights and casts per op (`torch.autocast` with a `GradScaler`), or uses bfloat16, whose range is
float32's. Evidence that it trains: the optimizer is stepped in a loop of the scope, or by a method
of the class (a training step); an optimizer built and handed elsewhere reports only in strict mode.

Averages (`ema = deepcopy(model).half()`, `AveragedModel(model).half()`, `self.ema.half()` on such a
copy) updated with a decay d >= 0.999 written where the average is kept: the increment
(1 - d) * (p - e) falls below half a float16 spacing of e, and `e * d` rounds back to e, so the
average stops moving. Measured (torch 2.13, CPU, 4096 weights starting at 1.0 and drifting to 1.5
over 10000 steps): with d = 0.9999 the float16 average stays exactly 1.0 in every update form
(`mul_(d).add_(p, alpha=1 - d)`, `lerp_(p, 1 - d)`, `d * e + (1 - d) * p`) where float32's reaches
1.1837; with d = 0.999 `lerp_` moves it to 1.0117 where float32's is 1.4496.

Left alone: a cast with no optimizer after it in the scope (inference, export), a cast straight
back (`model.half().float()`), an optimizer over another module's parameters, a cast to any other
dtype (bfloat16 trains), a model or optimizer handed to a wrapper that keeps float32 master weights
(fairseq's `FP16Optimizer`/`MemoryEfficientFP16Optimizer`, apex's `FP16_Optimizer` and
`amp.initialize`, `deepspeed.initialize`), a float16 copy made to be saved (`'ema':
deepcopy(ema).half()` in a checkpoint), and an average with no decay near 1 in sight. A guide: the
rewrite touches the whole training loop.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.evidence import STRICT_WHY
from torchnumlint.rules.mixed_precision.half_casts import (
    Event,
    Events,
    decay_near_one,
    steps_in_class,
    updates_weights,
)

_TRAINED = (
    "weights, gradients and the optimizer's state all live in float16 (a loss above 65504 is Inf, an "
    "update below a weight's spacing vanishes); keep float32 weights under `torch.autocast` with a "
    "`GradScaler`, or use bfloat16"
)
_AVERAGED = (
    "the increment (1 - decay) * (p - ema) is below half a float16 spacing of the average, which "
    "stops moving (measured: decay 0.9999, weights drifting from 1.0 to 1.5 over 10000 steps: the "
    "float16 average stays at 1.0, a float32 one reaches 1.18); keep the average in float32 and cast "
    "a copy to float16 only to save or export it"
)


class HalfModelTraining(Rule):
    code = "TNL304"
    name = "half-model-training"
    finds = (
        "`model.half()` / `.to(torch.float16)` on a module that a `torch.optim` optimizer then trains "
        "in a loop (float16 weights, gradients and state; no fp32 master copy), or a float16 weight "
        "average (`deepcopy(model).half()`) with decay >= 0.999, which stops moving"
    )
    fix_summary = "message (float32 weights under `torch.autocast` with a `GradScaler`, or bfloat16; a float32 average)"
    message = "`{model}` is {what} ({cast}){how}: {hazard}"
    rationale = (
        "`model.half()` makes every parameter, gradient, optimizer state and activation float16. "
        "Measured on torch 2.13 (CPU): `mse_loss` of `nn.Linear(64, 1).half()` against targets of "
        "300 is inf, where the same float32 model gives 90067 (autocast computes the loss in "
        "float32: the catalogue's 90320.8). Small updates vanish too: a weight of 1.0 in float16 "
        "does not move for any update below 4.9e-4. Mixed precision keeps float32 master weights "
        "and casts per op under `torch.autocast(device, dtype=torch.float16)` with a `GradScaler`, "
        "or trains in bfloat16, whose range is float32's. A float16 copy kept as an exponential "
        "average of the weights stops moving once the decay is close to 1: measured with 4096 "
        "weights drifting from 1.0 to 1.5 over 10000 steps, a float16 average with decay 0.9999 "
        "stays exactly 1.0 (a float32 one reaches 1.1837); with decay 0.999, `lerp_` reaches 1.0117 "
        "(float32: 1.4496). Wrappers that keep float32 master weights (fairseq's `FP16Optimizer`, "
        "apex, DeepSpeed) are left alone. No rewrite is offered: the change touches the whole "
        "training loop."
    )
    safety = Safety.GUIDE
    needles = ("half", "float16")
    pattern = r"optim|deepcopy|AveragedModel"
    examples = (
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def train(x, y, steps=3):\n"
                "    model = nn.Linear(64, 1).half()\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)\n"
                "    for _ in range(steps):\n"
                "        loss = nn.functional.mse_loss(model(x.half()), y.half())\n"
                "        optimizer.zero_grad()\n"
                "        loss.backward()\n"
                "        optimizer.step()\n"
                "    return loss\n"
            ),
            lines=(6,),
            fixed=None,
        ),
        Example(
            bad=(
                "import copy\n"
                "import torch\n"
                "\n"
                "\n"
                "def averaged(model, drift, steps=10000, decay=0.9999):\n"
                "    ema = copy.deepcopy(model).half()\n"
                "    with torch.no_grad():\n"
                "        for _ in range(steps):\n"
                "            for p in model.parameters():\n"
                "                p.add_(drift)\n"
                "            for e, p in zip(ema.parameters(), model.parameters()):\n"
                "                e.mul_(decay).add_(p.to(e.dtype), alpha=1 - decay)\n"
                "    return next(ema.parameters())\n"
            ),
            lines=(6,),
            fixed=None,
        ),
    )
    good = (
        # float32 master weights: the same steps in float32 (autocast would keep the loss in float32)
        "import torch\n"
        "from torch import nn\n"
        "\n"
        "\n"
        "def train(x, y, steps=3):\n"
        "    model = nn.Linear(64, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)\n"
        "    for _ in range(steps):\n"
        "        loss = nn.functional.mse_loss(model(x), y)\n"
        "        optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "    return loss\n",
        # the same average in float32
        "import copy\n"
        "import torch\n"
        "\n"
        "\n"
        "def averaged(model, drift, steps=10000, decay=0.9999):\n"
        "    ema = copy.deepcopy(model)\n"
        "    with torch.no_grad():\n"
        "        for _ in range(steps):\n"
        "            for p in model.parameters():\n"
        "                p.add_(drift)\n"
        "            for e, p in zip(ema.parameters(), model.parameters()):\n"
        "                e.mul_(decay).add_(p, alpha=1 - decay)\n"
        "    return next(ema.parameters())\n",
        # a half model for inference only
        "import torch\ndef export(model, x):\n    model = model.half().eval()\n    with torch.no_grad():\n        return model(x.half())\n",
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
        """Casts, then what trains or averages the cast module, in the order they are written."""
        events = Events(self.ctx, scope).found
        cls = self.ctx.enclosing(cst.ClassDef) if isinstance(scope, cst.FunctionDef) else None
        masters = {ev.name for ev in events if ev.kind == "master"}
        copies = {ev.name for ev in events if ev.kind == "copy"}
        cast: Dict[str, Event] = {}
        for ev in events:
            if ev.kind == "cast":
                if ev.name in copies:
                    self._average(ev, cls or scope)
                else:
                    cast.setdefault(ev.name, ev)
            elif ev.kind in ("uncast", "copy"):
                cast.pop(ev.name, None)
            elif ev.kind == "optimizer" and ev.name in cast:
                at = cast.pop(ev.name)
                if ev.name in masters or ev.text in masters:
                    continue  # float32 master weights are kept and stepped by the wrapper
                self._trained(at, ev, events, cls)

    def _trained(self, cast: Event, optimizer: Event, events: List[Event], cls: Optional[cst.CSTNode]) -> None:
        """Report a trained half model where the optimizer is stepped again and again: in a loop of
        the scope, or by a method of the class (a training step); else only in strict mode."""
        call = optimizer.node
        by = self.ctx.module.code_for_node(call.func) if isinstance(call, cst.Call) else "an optimizer"
        steps = self._steps(optimizer, events, cls)
        if steps is not None:
            how = f" trained by `{by}` on line {self._line(call)}{steps}"
        elif self.ctx.strict:
            how = f" given to `{by}` on line {self._line(call)}, which may train it {STRICT_WHY}"
        else:
            return
        self.report(cast.node, None, model=cast.name, what="a float16 model", cast=cast.text, how=how, hazard=_TRAINED)

    def _steps(self, optimizer: Event, events: List[Event], cls: Optional[cst.CSTNode]) -> Optional[str]:
        bound = optimizer.text
        if not bound:
            return None
        for ev in events:
            if ev.kind == "step" and ev.name == bound and ev.in_loop:
                return f", stepped in a loop on line {self._line(ev.node)}"
        if bound.startswith("self.") and isinstance(cls, cst.ClassDef):
            for step in steps_in_class(cls, bound):
                return f", stepped by the class on line {self._line(step)}"
        return None

    def _average(self, cast: Event, where: cst.CSTNode) -> None:
        """Report a float16 copy of a model whose weights are averaged with a decay close to 1."""
        decay = decay_near_one(where)
        if decay is None or not updates_weights(where, cast.name):
            return
        text, node = decay
        self.report(
            cast.node,
            None,
            model=cast.name,
            what="a float16 weight average",
            cast=cast.text,
            how=f" with decay {text} (line {self._line(node)})",
            hazard=_AVERAGED,
        )

    def _line(self, node: cst.CSTNode) -> object:
        span = self.ctx.positions.get(node)
        return span.start.line if span is not None else "?"
