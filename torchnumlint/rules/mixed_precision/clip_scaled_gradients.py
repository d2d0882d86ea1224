"""TNL307 clip-scaled-gradients: gradients clipped while a GradScaler's scale is still in them.

`scaler.scale(loss).backward()`, then `clip_grad_norm_` / `clip_grad_value_`, then
`scaler.step(opt)`, with no `scaler.unscale_(opt)` between the backward and the clip, in one
function, in source order. The gradients hold the loss scale (65536 by default) until
`unscale_` or `step` removes it, so the clip measures (or bounds) values the scale times too
large: measured (torch 2.13, the reproduction), the clipped update is 65536 times too small.

The fix inserts `scaler.unscale_(opt)` just before the clip, `opt` being what `scaler.step(...)`
is given; `step` then does not unscale twice (torch records that `unscale_` ran). UNSAFE: it
changes the update (to the one clipping meant).

Not reported: a clip with `unscale_` before it, a clip of a backward that is not scaled, a clip
after the step (of the next iteration's gradients: the step unscaled them), `accelerator.
clip_grad_norm_` (Accelerate unscales first).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.walk import Visitor

CLIPS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
    }
)


class _Steps(Visitor):
    """One function's scaler calls in source order: (what, scaler text, call) with what one of
    "backward" (`S.scale(l).backward()`), "unscale" (`S.unscale_(o)`), "step" (`S.step(o)`),
    "clip" (a clip call, scaler None)."""

    def __init__(self, ctx, root: cst.FunctionDef) -> None:
        self.ctx = ctx
        self.root = root
        self.found: List[Tuple[str, Optional[str], cst.Call]] = []
        self.walk(root)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        code = self.ctx.module.code_for_node
        func = node.func
        if self.ctx.qualname(func) in CLIPS:
            self.found.append(("clip", None, node))
            return
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        owner = func.value
        if method == "backward" and isinstance(owner, cst.Call) and isinstance(owner.func, cst.Attribute):
            if owner.func.attr.value == "scale" and len(owner.args) == 1:
                self.found.append(("backward", code(owner.func.value), node))
        elif method in ("unscale_", "step") and isinstance(owner, (cst.Name, cst.Attribute)) and node.args:
            self.found.append(("unscale" if method == "unscale_" else "step", code(owner), node))


class ClipScaledGradients(Rule):
    code = "TNL307"
    name = "clip-scaled-gradients"
    finds = "`clip_grad_norm_`/`clip_grad_value_` between `scaler.scale(loss).backward()` and `scaler.step(opt)` with no `scaler.unscale_(opt)` first"
    fix_summary = "unsafe: `scaler.unscale_(opt)` inserted before the clip"
    message = (
        "`{clip}` clips gradients still multiplied by `{scaler}`'s loss scale (scaled backward at line "
        "{line}): the norm it measures is the scale times too large and the update far too small; "
        "call `{scaler}.unscale_({opt})` before clipping"
    )
    rationale = (
        "A GradScaler multiplies the loss, and so every gradient, by its scale (65536 at the start) "
        "until `scaler.unscale_(optimizer)` or `scaler.step(optimizer)` divides it out. Clipping in "
        "between measures the scaled gradients: measured (torch 2.13, scale 65536, max_norm=1), the "
        "norm clip_grad_norm_ sees is 65536 times the real one and the update that follows is 65536 "
        "times too small (the reproduction's weight change 1.5e-6 where 0.1 is right). Call "
        "`scaler.unscale_(optimizer)` just before the clip; `step` then does not unscale again."
    )
    safety = Safety.UNSAFE
    needles = ("clip_grad",)
    pattern = r"\.scale\("

    examples = (
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def train_step(x, y, w):\n"
                "    model = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)\n"
                "    with torch.no_grad():\n"
                "        model.weight.copy_(w)\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                '    scaler = torch.amp.GradScaler("cuda", init_scale=65536.0)\n'
                '    with torch.autocast("cuda"):\n'
                "        loss = nn.functional.mse_loss(model(x), y)\n"
                "    scaler.scale(loss).backward()\n"
                "    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
                "    return model.weight.detach()\n"
            ),
            lines=(14,),
            fixed=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def train_step(x, y, w):\n"
                "    model = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)\n"
                "    with torch.no_grad():\n"
                "        model.weight.copy_(w)\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                '    scaler = torch.amp.GradScaler("cuda", init_scale=65536.0)\n'
                '    with torch.autocast("cuda"):\n'
                "        loss = nn.functional.mse_loss(model(x), y)\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.unscale_(optimizer)\n"
                "    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
                "    return model.weight.detach()\n"
            ),
        ),
    )
    good = (
        # unscale_ first: the clip sees the real gradients
        "import torch\n"
        "def step(model, loss, optimizer, scaler):\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.unscale_(optimizer)\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n",
        # no scaler: plain gradients
        "import torch\n"
        "def step(model, loss, optimizer):\n"
        "    loss.backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    optimizer.step()\n",
        # the clip after the step belongs to no scaled backward
        "import torch\n"
        "def step(model, loss, optimizer, scaler):\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualname(node.func) not in CLIPS:
            return
        steps = self.ctx.per_scope(
            "tnl307-steps", lambda scope: _Steps(self.ctx, scope).found if isinstance(scope, cst.FunctionDef) else []
        )
        at = next((i for i, s in enumerate(steps) if s[2] is node), None)
        backward = next((s for s in reversed(steps[:at]) if s[0] == "backward"), None) if at is not None else None
        if at is None or backward is None:
            return
        scaler = backward[1]
        between = steps[steps.index(backward) + 1 : at]
        if any(kind in ("unscale", "step") and owner == scaler for kind, owner, _ in between):
            return  # unscaled already (by `unscale_`, or by a `step` of an earlier backward)
        step = next((s for s in steps[at + 1 :] if s[0] == "step" and s[1] == scaler), None)
        if step is None:
            return
        opt = self.ctx.module.code_for_node(step[2].args[0].value)
        line = self.ctx.positions[backward[2]].start.line
        clip = (self.ctx.qualname(node.func) or "").rsplit(".", 1)[-1]
        self.report(node, self._fix(scaler, opt), clip=clip, scaler=scaler, line=line, opt=opt)

    def _fix(self, scaler: Optional[str], opt: str):
        """`scaler.unscale_(opt)` as the statement before the clip's, in its block: a line below
        the statement before it, or, first in its block, below the block's header (`if ...:`,
        `for ...:`, `with ...:`), one indentation deeper."""
        path = self.ctx.stack
        line = next((n for n in reversed(path) if isinstance(n, cst.SimpleStatementLine)), None)
        block = next((n for n in reversed(path) if isinstance(n, cst.IndentedBlock)), None)
        if line is None or block is None or line not in block.body:
            return None
        unscale = f"{scaler}.unscale_({opt})"
        at = list(block.body).index(line)
        if at:
            return self.fix().insert_line_after(block.body[at - 1], unscale)
        owner = path[path.index(block) - 1]
        header = _header_end(owner)
        if header is None or block.indent is not None:
            return None
        return self.fix().insert_line_after(header, self.ctx.module.default_indent + unscale)


def _header_end(owner: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The last expression of a compound statement's header, where its block's first line follows."""
    if isinstance(owner, (cst.If, cst.While)):
        return owner.test
    if isinstance(owner, cst.For):
        return owner.iter
    if isinstance(owner, cst.With):
        return owner.items[-1]
    return None
