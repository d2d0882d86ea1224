"""TNL302 fp16-without-grad-scaler: a backward of fp16 autocast values with no loss scaling.

Reports an fp16 autocast region (a `with` item or a decorator) whose value is differentiated
(`loss.backward()`) in the same function, or, for a decorated function, by a function of the
file that calls it, unless the loss goes to a scaler or to a framework that scales it, or the
project index (`torchnumlint/index.py`) saw loss scaling set up anywhere in the project.
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.amp import fp16_openers
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.bindings import is_no_grad_item, read_names
from torchnumlint.walk import Visitor


# Functions for evaluation or sampling: a region there is inference, not training.
_INFERENCE = re.compile(r"^_*(eval|valid|test|predict|infer|generate|sample|__call__$)")


class _Flow(Visitor):
    """One function's data flow, enough for TNL302: its assignments, its `.backward()` calls and
    the calls that scale a loss (`scaler.scale(loss)`, `loss_scaler(loss, opt)`,
    `amp.scale_loss(loss, opt)`) or hand it to a framework's backward (`accelerator.backward(loss)`,
    `engine.backward(loss)`, `self.manual_backward(loss)`), which scale it themselves."""

    def __init__(self, ctx, root: cst.CSTNode) -> None:
        self.ctx = ctx
        self.root = root
        self.assigns: List[Tuple[List[str], cst.CSTNode]] = []
        self.calls: List[cst.Call] = []
        self.walk(root)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        names = [n for t in node.targets for n in _plain_names(t.target)]
        self.assigns.append((names, node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.assigns.append((list(_plain_names(node.target)), node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.assigns.append((list(_plain_names(node.target)), node.value))

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def unscaled_backward(self, seeds: Sequence[str] = (), region_funcs: Sequence[str] = (), anywhere: bool = False) -> Optional[cst.Call]:
        """The first `.backward()` on a value derived from `seeds` (names assigned in the region),
        from a call of an fp16-decorated function in `region_funcs`, or on any value when the
        flow is the region's own body (`anywhere`), unless the loss is scaled here."""
        tainted = set(seeds)

        def derived(expr: cst.CSTNode) -> bool:
            return anywhere or any(n in tainted for n in _plain_names(expr)) or any(_callee_name(c) in region_funcs for c in _calls(expr))

        for _ in range(len(self.assigns) + 1):
            grown = {n for names, value in self.assigns if derived(value) for n in names} - tainted
            if not grown:
                break
            tainted |= grown
        found = None
        for call in self.calls:
            name = _callee_name(call)
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if name == "backward" and receiver is not None and derived(receiver):
                found = found or call
            elif self.ctx.qualname(call.func) == "torch.autograd.backward" and call.args and derived(call.args[0].value):
                found = found or call
            elif any(derived(a.value) for a in call.args) and (name == "backward" or "scale" in (name or "").lower()):
                return None  # the loss goes to a scaler or a framework's backward
        return found


def _plain_names(node: cst.CSTNode) -> Set[str]:
    """The names read or bound in an expression, attribute names left out."""
    return {name for name in read_names(node) if "." not in name}


def _calls(node: cst.CSTNode) -> List[cst.Call]:
    found: List[cst.Call] = []

    class _Collect(Visitor):
        def visit_Call(self, n: cst.Call) -> None:
            found.append(n)

    _Collect().walk(node)
    return found


def _functions(module: cst.Module) -> List[cst.FunctionDef]:
    found: List[cst.FunctionDef] = []

    class _Collect(Visitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            found.append(n)

    _Collect().walk(module)
    return found


def _callee_name(call: cst.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


class Fp16WithoutGradScaler(Rule):
    code = "TNL302"
    name = "fp16-without-grad-scaler"
    finds = "fp16 autocast and `.backward()` with no `GradScaler` in the project"
    fix_summary = "message (add a `GradScaler`, or bf16)"
    message = (
        "`{backward}` on a value computed under fp16 autocast{opt_in}, and no GradScaler in the "
        'project: gradients below 6e-8 flush to 0; use `scaler = torch.amp.GradScaler("{device}")` '
        "and `scaler.scale(loss).backward()`, or autocast to bfloat16"
    )
    rationale = (
        "Under float16 autocast the backward pass also runs in float16, whose smallest subnormal is "
        "6e-8: small gradients underflow to exactly 0 and the weights they belong to stop "
        "learning, silently. Measured: with a loss coefficient of 1e-9, 4096 of 4096 weight "
        "gradients were exactly 0; with a GradScaler none were. `torch.amp.GradScaler` multiplies "
        "the loss before backward and unscales (and skips steps with Inf) afterwards. bfloat16 "
        "has the exponent range of float32 and needs no scaler. Reported only where `.backward()` "
        "is called, in the same function, on a value computed in the fp16 region: inference "
        "regions, losses handed to a scaler or to a framework that scales them "
        "(`accelerator.backward(loss)`, DeepSpeed's `engine.backward(loss)`, Lightning's "
        "`manual_backward`, apex `amp.scale_loss`) are not."
    )
    safety = Safety.GUIDE
    needs_index = True
    needles = ("autocast",)
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def train_step(w, x):\n"
                '    with torch.autocast("cuda"):\n'
                "        loss = (x @ w).sum() * 1e-9\n"
                "    loss.backward()\n"
                "    return w.grad\n"
            ),
            lines=(5,),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch.cuda.amp import autocast\n"
                "\n"
                "\n"
                "def fit(model, loader, optimizer, loss_fn):\n"
                "    for x, y in loader:\n"
                "        optimizer.zero_grad()\n"
                "        with autocast():\n"
                "            out = model(x)\n"
                "        loss = loss_fn(out, y) / len(x)\n"
                "        loss.backward()\n"
                "        optimizer.step()\n"
            ),
            lines=(8,),
        ),
    )
    good = (
        # a scaler is constructed
        "import torch\n"
        "def fit(model, loader, optimizer, loss_fn):\n"
        '    scaler = torch.amp.GradScaler("cuda")\n'
        "    for x, y in loader:\n"
        '        with torch.autocast("cuda"):\n'
        "            loss = loss_fn(model(x), y)\n"
        "        scaler.scale(loss).backward()\n"
        "        scaler.step(optimizer)\n"
        "        scaler.update()\n",
        # bf16 needs none
        "import torch\n"
        "def fit(model, x, y, loss_fn):\n"
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "        loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n",
        # inference only
        'import torch\ndef predict(model, x):\n    with torch.no_grad(), torch.autocast("cuda"):\n        return model(x)\n',
        # CPU autocast is bf16
        "import torch\n"
        "def fit(model, x, y, loss_fn):\n"
        '    with torch.autocast("cpu"):\n'
        "        loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n",
        # the framework scales the loss (Accelerate with mixed_precision="fp16")
        "import torch\n"
        "def fit(accelerator, model, x, y, loss_fn):\n"
        '    with torch.autocast("cuda"):\n'
        "        loss = loss_fn(model(x), y)\n"
        "    accelerator.backward(loss)\n",
        # the backward is of something else: a float32 reconstruction penalty outside the region
        "import torch\n"
        "def fit(model, x, y, loss_fn):\n"
        '    with torch.autocast("cuda"):\n'
        "        preview = model(x)\n"
        "    penalty = (model.decode(x.float()) - x).abs().mean()\n"
        "    penalty.backward()\n"
        "    return preview\n",
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._flows: Optional[List[_Flow]] = None

    def _inference(self, function: Optional[cst.FunctionDef]) -> bool:
        return self.ctx.in_no_grad() or (function is not None and bool(_INFERENCE.match(function.name.value)))

    def _report(self, item: cst.BaseExpression, found: Tuple[str, bool], backward: cst.Call) -> None:
        device, opt_in = found
        self.report(
            item,
            None,
            device=device,
            backward=self.ctx.module.code_for_node(backward).splitlines()[0][:60],
            opt_in=" (enabled only by its `enabled=` flag)" if opt_in else "",
        )

    def visit_With(self, node: cst.With) -> None:
        if self.ctx.index.has_scaler() or any(is_no_grad_item(self.ctx.imports, i.item) for i in node.items):
            return
        openers = fp16_openers(self.ctx, node)
        if not openers or self._inference(self.ctx.enclosing(cst.FunctionDef)):
            return
        body = _Flow(self.ctx, node.body)
        flow = self.ctx.per_scope("tnl302-flow", lambda scope: _Flow(self.ctx, scope))
        backward = body.unscaled_backward(anywhere=True) or flow.unscaled_backward([n for names, _ in body.assigns for n in names])
        if backward is not None:
            self._report(*openers[0], backward)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """`@torch.autocast("cuda")` on a function whose result a function of this file calls
        `.backward()` on (`loss_of(model, x).backward()`)."""
        if self.ctx.index.has_scaler() or self._inference(node):
            return
        openers = fp16_openers(self.ctx, node)
        if not openers:
            return
        if self._flows is None:
            self._flows = [_Flow(self.ctx, f) for f in [self.ctx.module, *_functions(self.ctx.module)]]
        for flow in self._flows:
            backward = flow.unscaled_backward(region_funcs=(node.name.value,))
            if backward is not None:
                self._report(*openers[0], backward)
                return
