"""TNL3xx, mixed precision: custom ops under fp16 autocast, fp16 without a GradScaler, the
deprecated `torch.cuda.amp` spellings.

TNL301 and TNL302 read the project index (`torchnumlint/index.py`): which classes are project
`nn.Module`s / `autograd.Function`s, the fp16 hazards of their `forward`, which forwards an fp16
autocast region reaches through the project's call graph, and whether a GradScaler is constructed
anywhere.

TNL301 reports at the hazardous op in the forward of what a region reaches (a Function once, with
its fix), citing the region; a forward no region reaches is not reported, however risky: most
models are handed to a training loop whose precision the linter cannot see.
TNL302 reports a region whose value is differentiated (`loss.backward()`) in the same function
without loss scaling.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.index import (
    CUSTOM_FWD,
    ClassInfo,
    Hazard,
    ProjectIndex,
    Site,
    classify_autocast,
    with_partial,
)
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.names import dotted, is_no_grad_item, read_names
from torchnumlint.rules.rewrite import as_keyword, keyword_arg, with_keyword
from torchnumlint.walk import Visitor

_CUSTOM_BWD = ("torch.amp.custom_bwd", "torch.amp.autocast_mode.custom_bwd", "torch.cuda.amp.custom_bwd",
               "torch.cuda.amp.autocast_mode.custom_bwd")


# ---------------------------------------------------------------------------------------------
# Autocast regions as this file sees them


def _simple(ctx, expr: cst.BaseExpression) -> object:
    """The value vocabulary of `index.classify_autocast`: str / bool literals, ("q", qualname)."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    if isinstance(expr, (cst.Name, cst.Attribute)):
        qual = ctx.qualname(expr)
        return ("q", qual) if qual is not None else None
    return None


def call_shape(ctx, call: cst.Call) -> Tuple[Optional[str], List[object], Dict[str, object]]:
    """(qualified callee, positional values, keyword values) in the vocabulary of `_simple`: the
    form `index.classify_autocast` reads, so the index (ast) and the rules (LibCST) agree."""
    pos: List[object] = []
    kw: Dict[str, object] = {}
    for arg in call.args:
        if arg.star:
            if arg.star == "*":
                break
            continue
        if arg.keyword is None:
            pos.append(_simple(ctx, arg.value))
        else:
            kw[arg.keyword.value] = _simple(ctx, arg.value)
    return ctx.qualname(call.func), pos, kw


def fp16_autocast(ctx, expr: cst.BaseExpression) -> Optional[Tuple[str, bool]]:
    """(device, opt_in) of an fp16 autocast used as a `with` item or decorator, else None: a call
    (`torch.autocast("cuda")`), a name bound to one (`amp = torch.autocast(...)`; `with amp:`),
    or a call of `functools.partial(torch.autocast, ...)`, as the index reads them."""
    if isinstance(expr, cst.Name):
        expr = ctx.resolve(expr)
    if not isinstance(expr, cst.Call):
        return None
    partial = None
    if isinstance(expr.func, cst.Name):
        bound = ctx.resolve(expr.func)
        partial = call_shape(ctx, bound) if isinstance(bound, cst.Call) else None
    return classify_autocast(*with_partial(*call_shape(ctx, expr), partial))


def find_class(module: cst.Module, name: str) -> Optional[cst.ClassDef]:
    """The one class called `name` in `module` (at any depth), else None."""
    found: List[cst.ClassDef] = []

    class _Find(Visitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            if node.name.value == name:
                found.append(node)

    _Find().walk(module)
    return found[0] if len(found) == 1 else None


def _method(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    return methods[0] if len(methods) == 1 else None


def custom_fwd_fix(rule: Rule, info: ClassInfo, device: str):
    """Add `@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)` to the Function's
    forward (and `@torch.amp.custom_bwd(device_type=...)` to its backward), just under
    `@staticmethod`; or `cast_inputs=` to a custom_fwd already there. None when not possible."""
    ctx = rule.ctx
    if info.path != ctx.path:
        return None
    cls = find_class(ctx.module, info.name)
    forward = _method(cls, "forward") if cls is not None else None
    if forward is None:
        return None
    fix = rule.fix()
    code = ctx.module.code_for_node
    float32 = code(fix.ref("torch.float32"))
    existing = [d for d in forward.decorators if _deco_qual(ctx, d) in CUSTOM_FWD]
    if existing:
        deco = existing[0].decorator
        value = cst.parse_expression(float32)
        if isinstance(deco, cst.Call):
            fix.replace(deco, with_keyword(deco, "cast_inputs", value))
        else:
            fix.replace(deco, cst.parse_expression(f"{code(deco)}(cast_inputs={float32})"))
        return fix
    if not _insert_under_staticmethod(
        fix, forward, f'{code(fix.ref("torch.amp.custom_fwd"))}(device_type="{device}", cast_inputs={float32})'
    ):
        return None
    backward = _method(cls, "backward")  # type: ignore[arg-type]
    if backward is not None and not any(_deco_qual(ctx, d) in _CUSTOM_BWD for d in backward.decorators):
        _insert_under_staticmethod(fix, backward, f'{code(fix.ref("torch.amp.custom_bwd"))}(device_type="{device}")')
    return fix


def _deco_qual(ctx, deco: cst.Decorator) -> Optional[str]:
    expr = deco.decorator
    return ctx.qualname(expr.func if isinstance(expr, cst.Call) else expr)


def _insert_under_staticmethod(fix, func: cst.FunctionDef, text: str) -> bool:
    """Add the decorator `@text` just below the method's one `@staticmethod`."""
    static = [d for d in func.decorators if isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"]
    if len(static) != 1:
        return False
    fix.insert_line_after(static[0], f"@{text}")
    return True


def _region_text(site: Site) -> str:
    """Where a finding's fp16 comes from: the region, and whether only a flag turns it on."""
    return site.where + (", enabled only by its `enabled=` flag" if site.opt_in else "")


# ---------------------------------------------------------------------------------------------
# TNL301


class Fp16AutocastCustomOp(Rule):
    code = "TNL301"
    name = "fp16-autocast-custom-op"
    message = "{what} under fp16 autocast ({where}): {advice}"
    rationale = (
        "CUDA autocast runs a list of ops in float32 (exp, log, pow, sum, softmax, the norms) and "
        "leaves the rest in float16, whose largest value is 65504. A custom "
        "`torch.autograd.Function` runs its forward with autocast still on: its element-wise "
        "arithmetic gets float16 inputs, and so do compiled extension kernels it calls, which "
        "often assume float32. Measured: a Function whose forward squares a Gram matrix returned "
        "NaN rows under fp16 autocast (the square is Inf past 255); with "
        "`@torch.amp.custom_fwd(device_type=\"cuda\", cast_inputs=torch.float32)` it is finite. "
        "Likewise a project `nn.Module` that an fp16 autocast region reaches through the call "
        "graph, whose forward computes what overflows or underflows in float16: `x * x` (Inf "
        "once |x| > 255), `var`, `masked_fill` with a constant beyond 65504, an eps added in float16 (below 2.98e-8 it rounds to 0; from 2.98e-8 up to "
        "1.53e-5 it is a subnormal whose reciprocal is Inf). Not hazards: ops CUDA runs in "
        "float32, `sigmoid`/`tanh`, `sqrt`, `mean` (accumulates in float32), Python-number "
        "arithmetic. Fix the Function with `custom_fwd(cast_inputs=torch.float32)` (+ "
        "`custom_bwd`); compute the Module's risky part in a float32 island "
        "(`with torch.autocast(\"cuda\", enabled=False):` on `.float()` inputs) or autocast to "
        "bfloat16."
    )
    safety = Safety.SAFE
    needs_index = True
    needles = ("forward",)

    @classmethod
    def could_fire(cls, text: str, index: Optional[ProjectIndex] = None) -> bool:
        # a forward here, reached from an fp16 autocast region somewhere in the project
        return "forward" in text and (index is None or bool(index.reached))

    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "class PairAffinity(torch.autograd.Function):\n"
                "    @staticmethod\n"
                "    def forward(ctx, scores):\n"
                "        gram = scores @ scores.transpose(-1, -2)\n"
                "        energy = gram * gram\n"
                "        ctx.save_for_backward(scores, gram, energy)\n"
                "        return energy / (1 + energy)\n"
                "\n"
                "    @staticmethod\n"
                "    def backward(ctx, grad_out):\n"
                "        scores, gram, energy = ctx.saved_tensors\n"
                "        grad_gram = 2 * gram * grad_out / (1 + energy) ** 2\n"
                "        return (grad_gram + grad_gram.transpose(-1, -2)) @ scores\n"
                "\n"
                "\n"
                "def step(x, w):\n"
                '    with torch.autocast("cuda"):\n'
                "        scores = x @ w\n"
                "        return PairAffinity.apply(scores)\n"
            ),
            lines=(8,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "class PairAffinity(torch.autograd.Function):\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
                "    def forward(ctx, scores):\n"
                "        gram = scores @ scores.transpose(-1, -2)\n"
                "        energy = gram * gram\n"
                "        ctx.save_for_backward(scores, gram, energy)\n"
                "        return energy / (1 + energy)\n"
                "\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_bwd(device_type="cuda")\n'
                "    def backward(ctx, grad_out):\n"
                "        scores, gram, energy = ctx.saved_tensors\n"
                "        grad_gram = 2 * gram * grad_out / (1 + energy) ** 2\n"
                "        return (grad_gram + grad_gram.transpose(-1, -2)) @ scores\n"
                "\n"
                "\n"
                "def step(x, w):\n"
                '    with torch.autocast("cuda"):\n'
                "        scores = x @ w\n"
                "        return PairAffinity.apply(scores)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "class EnergyHead(nn.Module):\n"
                "    def forward(self, h):\n"
                "        return (h * h).sum(-1)\n"
                "\n"
                "\n"
                "class Scorer(nn.Module):\n"
                "    def __init__(self, dim):\n"
                "        super().__init__()\n"
                "        self.proj = nn.Linear(dim, dim)\n"
                "        self.head = EnergyHead()\n"
                "\n"
                '    @torch.autocast(device_type="cuda", dtype=torch.float16)\n'
                "    def score(self, x):\n"
                "        return self.head(self.proj(x))\n"
            ),
            lines=(7,),
            fixed=None,
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn as nn\n"
                "\n"
                "\n"
                "class RMSNorm(nn.Module):\n"
                "    def __init__(self, dim, eps=1e-8):\n"
                "        super().__init__()\n"
                "        self.eps = eps\n"
                "        self.weight = nn.Parameter(torch.ones(dim))\n"
                "\n"
                "    def forward(self, x):\n"
                "        rms = torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps)\n"
                "        return self.weight * x / rms\n"
                "\n"
                "\n"
                "def build(dim):\n"
                "    return nn.Sequential(nn.Linear(dim, dim), RMSNorm(dim))\n"
                "\n"
                "\n"
                "def train_step(dim, batch, optimizer, scaler, use_amp):\n"
                "    model = build(dim)\n"
                "    with torch.cuda.amp.autocast(enabled=use_amp):\n"
                "        loss = model(batch).mean()\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
            ),
            lines=(12,),
            fixed=None,
        ),
    )
    good = (
        # bf16 autocast: the range of fp32
        "import torch\n"
        "class Square(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, s):\n"
        "        return s * s\n"
        "def step(x):\n"
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "        return Square.apply(x)\n",
        # the Function casts its inputs to fp32
        "import torch\n"
        "class Square(torch.autograd.Function):\n"
        "    @staticmethod\n"
        '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
        "    def forward(ctx, s):\n"
        "        return s * s\n"
        "def step(x):\n"
        '    with torch.autocast("cuda"):\n'
        "        return Square.apply(x)\n",
        # exp and sum of an exp-normalisation run in fp32 under CUDA autocast
        "import torch\n"
        "class ExpNormalize(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, s):\n"
        "        e = s.exp()\n"
        "        return e / e.sum(-1, keepdim=True)\n"
        "def step(x):\n"
        '    with torch.autocast("cuda"):\n'
        "        return ExpNormalize.apply(x)\n",
        # CPU autocast defaults to bf16
        "import torch\n"
        "from torch import nn\n"
        "class Head(nn.Module):\n"
        "    def forward(self, h):\n"
        "        return h.var(-1)\n"
        "def run(x):\n"
        '    with torch.autocast("cpu"):\n'
        "        return Head()(x)\n",
        # mean, sigmoid, sqrt and Python-number products do not overflow fp16
        "import torch\n"
        "from torch import nn\n"
        "class Gate(nn.Module):\n"
        "    def forward(self, h):\n"
        "        width = h.shape[-1]\n"
        "        scale = width * width\n"
        "        return torch.sigmoid(h).mean(-1) * torch.sqrt(h.abs()) / scale\n"
        "def run(x):\n"
        '    with torch.autocast("cuda"):\n'
        "        return Gate()(x)\n",
        # a hazard no fp16 region reaches: the model is handed in, this Module is never called
        "import torch\n"
        "from torch import nn\n"
        "class Energy(nn.Module):\n"
        "    def forward(self, h):\n"
        "        return h * h\n"
        "def run(model, x):\n"
        '    with torch.autocast("cuda"):\n'
        "        return model(x)\n",
        # autocast disabled
        "import torch\n"
        "class Square(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, s):\n"
        "        return s * s\n"
        "def step(x, amp):\n"
        '    with torch.autocast("cuda", enabled=False):\n'
        "        return Square.apply(x)\n",
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        index = self.ctx.index
        info = index.lookup(node.name.value, None, self.ctx.path)
        if info is None or info.path != self.ctx.path or info.kind not in ("module", "function") or not info.hazards:
            return
        site = index.reached_by(info)
        forward = _method(node, "forward")
        if site is None or forward is None:
            return
        found = self._hazard_nodes(forward, info.hazards)
        if info.kind == "function":
            hazard, expr = found[0]
            more = f" (+{len(info.hazards) - 1} more)" if len(info.hazards) > 1 else ""
            self.report(
                expr,
                custom_fwd_fix(self, info, site.device),
                what=f"custom autograd.Function `{info.name}` gets float16 inputs: {hazard.op}{more}",
                where=_region_text(site),
                advice=f'decorate its forward with `@torch.amp.custom_fwd(device_type="{site.device}", '
                "cast_inputs=torch.float32)`",
            )
            return
        for hazard, expr in found:
            self.report(
                expr,
                None,
                what=f"{hazard.op} in `{info.name}.forward` runs in float16",
                where=_region_text(site),
                advice="compute it in a float32 island (`.float()` under autocast(enabled=False)) or use bfloat16",
            )

    def _hazard_nodes(self, forward: cst.FunctionDef, hazards: List[Hazard]) -> List[Tuple[Hazard, cst.CSTNode]]:
        """The expressions the index's hazards (ast positions) point at, in source order."""
        positions = self.ctx.positions
        wanted = {(h.line, h.col, h.end_line, h.end_col): h for h in hazards}
        found: List[Tuple[Hazard, cst.CSTNode]] = []

        class _Find(Visitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                if isinstance(node, cst.BaseExpression):
                    where = positions.get(node)
                    if where is not None:
                        key = (where.start.line, where.start.column, where.end.line, where.end.column)
                        hazard = wanted.pop(key, None)
                        if hazard is not None:
                            found.append((hazard, node))
                return bool(wanted)

        _Find().walk(forward)
        return found


# ---------------------------------------------------------------------------------------------
# TNL302


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

    def unscaled_backward(self, seeds: Sequence[str] = (), region_funcs: Sequence[str] = (),
                          anywhere: bool = False) -> Optional[cst.Call]:
        """The first `.backward()` on a value derived from `seeds` (names assigned in the region),
        from a call of an fp16-decorated function in `region_funcs`, or on any value when the
        flow is the region's own body (`anywhere`), unless the loss is scaled here."""
        tainted = set(seeds)

        def derived(expr: cst.CSTNode) -> bool:
            return anywhere or any(n in tainted for n in _plain_names(expr)) or any(
                _callee_name(c) in region_funcs for c in _calls(expr)
            )

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
    message = (
        "`{backward}` on a value computed under fp16 autocast{opt_in}, and no GradScaler in the "
        "project: gradients below 6e-8 flush to 0; use `scaler = torch.amp.GradScaler(\"{device}\")` "
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
        "import torch\n"
        "def predict(model, x):\n"
        '    with torch.no_grad(), torch.autocast("cuda"):\n'
        "        return model(x)\n",
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
        for item in node.items:
            found = fp16_autocast(self.ctx, item.item)
            if found is None:
                continue
            function = self.ctx.enclosing(cst.FunctionDef)
            if self._inference(function):
                return
            body = _Flow(self.ctx, node.body)
            flow = self.ctx.per_scope("tnl302-flow", lambda scope: _Flow(self.ctx, scope))
            backward = body.unscaled_backward(anywhere=True) or flow.unscaled_backward(
                [n for names, _ in body.assigns for n in names]
            )
            if backward is not None:
                self._report(item.item, found, backward)
            return

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """`@torch.autocast("cuda")` on a function whose result a function of this file calls
        `.backward()` on (`loss_of(model, x).backward()`)."""
        if self.ctx.index.has_scaler() or self._inference(node):
            return
        for deco in node.decorators:
            found = fp16_autocast(self.ctx, deco.decorator)
            if found is None:
                continue
            if self._flows is None:
                self._flows = [_Flow(self.ctx, f) for f in [self.ctx.module, *_functions(self.ctx.module)]]
            for flow in self._flows:
                backward = flow.unscaled_backward(region_funcs=(node.name.value,))
                if backward is not None:
                    self._report(deco.decorator, found, backward)
                    return


# ---------------------------------------------------------------------------------------------
# TNL306


_CUDA_AUTOCAST = ("torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast")
_CUDA_SCALER = ("torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler")
_CUDA_FWD = ("torch.cuda.amp.custom_fwd", "torch.cuda.amp.autocast_mode.custom_fwd")
_CUDA_BWD = ("torch.cuda.amp.custom_bwd", "torch.cuda.amp.autocast_mode.custom_bwd")
_CUDA_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")


_CUDA = cst.SimpleString('"cuda"')
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _cuda_arg(comma: bool) -> cst.Arg:
    """The positional `"cuda"` that the torch.amp spellings take first."""
    return cst.Arg(value=_CUDA, comma=_COMMA if comma else cst.MaybeSentinel.DEFAULT)


# A test of the torch version (or of a newer API's presence).
# The torch.amp spellings that replace torch.cuda.amp's: a `try` that uses one has an old-torch
# fallback in its `except`.
_NEW_AMP = re.compile(r"torch\.amp\.|torch\.autocast\b|torch\.GradScaler\b")
_VERSION_TEST = re.compile(r"version|TORCH_(GREATER|LESS|GE|LT|VERSION)|hasattr\(torch", re.IGNORECASE)


def _module_bindings(body: Sequence[cst.CSTNode]) -> Dict[str, set]:
    """Module-level name -> what binds it, through `if`/`try`/`with` blocks (not functions or
    classes): an import's qualified name, or "<local>" for a def, class or assignment."""
    found: Dict[str, set] = {}

    def bind(name: str, what: str) -> None:
        found.setdefault(name, set()).add(what)

    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        full = dotted(alias.name)
                        bind(alias.asname.name.value if alias.asname else full.split(".")[0],  # type: ignore[union-attr]
                             full if alias.asname else full.split(".")[0])
                elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    base = "." * len(small.relative) + (dotted(small.module) if small.module else "")
                    for alias in small.names:
                        bind(alias.asname.name.value if alias.asname else dotted(alias.name),  # type: ignore[union-attr]
                             f"{base}.{dotted(alias.name)}")
                elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = small.targets if isinstance(small, cst.Assign) else [small]
                    for target in targets:
                        if isinstance(target.target, cst.Name):
                            bind(target.target.value, "<local>")
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            bind(stmt.name.value, "<local>")
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            for block in _blocks(stmt):
                for name, whats in _module_bindings(block).items():
                    found.setdefault(name, set()).update(whats)
    return found


def _blocks(stmt: cst.CSTNode) -> List[Sequence[cst.CSTNode]]:
    """The statement lists of an `if` (with its elif/else), a `try` (handlers, else, finally), a `with`."""
    blocks: List[Sequence[cst.CSTNode]] = []
    pending: List[Optional[cst.CSTNode]] = [stmt]
    while pending:
        node = pending.pop()
        if node is None:
            continue
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock):
            blocks.append(body.body)
        pending.extend(getattr(node, "handlers", ()))
        pending.extend([getattr(node, "orelse", None), getattr(node, "finalbody", None)])
    return blocks


_WARNS = " (FutureWarning)"


class DeprecatedCudaAmp(Rule):
    code = "TNL306"
    name = "deprecated-cuda-amp"
    message = "`{old}` is deprecated{why}: use `{new}`"
    rationale = (
        "`torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)` and "
        "`torch.cuda.amp.custom_fwd/custom_bwd` are deprecated in favour of the device-generic "
        "`torch.amp` API and emit a FutureWarning in torch 2.13; they will be removed. "
        "`torch.amp.autocast(\"cuda\", ...)` and `torch.amp.GradScaler(\"cuda\", ...)` behave the "
        "same (CUDA autocast still defaults to float16). The fix keeps every argument; positional "
        "arguments of `torch.cuda.amp.autocast` become keywords because the new signature puts "
        "`device_type` and `dtype` first."
    )
    safety = Safety.SAFE
    needles = ("cuda.amp", "cuda import amp")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._used: Optional[Dict[str, int]] = None
        self._bindings: Optional[Dict[str, set]] = None
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def forward_fp16(x, w):\n"
                "    with torch.cuda.amp.autocast():\n"
                "        return x @ w\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def forward_fp16(x, w):\n"
                '    with torch.amp.autocast("cuda"):\n'
                "        return x @ w\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch.cuda.amp import GradScaler, autocast\n"
                "\n"
                "scaler = GradScaler(init_scale=1024)\n"
                "\n"
                "\n"
                "def step(model, x, y, loss_fn, optimizer):\n"
                "    with autocast(dtype=torch.float16):\n"
                "        loss = loss_fn(model(x), y)\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
            ),
            lines=(4, 8),
            fixed=(
                "import torch\n"
                "\n"
                'scaler = torch.amp.GradScaler("cuda", init_scale=1024)\n'
                "\n"
                "\n"
                "def step(model, x, y, loss_fn, optimizer):\n"
                '    with torch.amp.autocast("cuda", dtype=torch.float16):\n'
                "        loss = loss_fn(model(x), y)\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
            ),
        ),
        Example(
            bad=(
                "from torch.cuda import amp\n"
                "from torch.autograd import Function\n"
                "\n"
                "\n"
                "class Square(Function):\n"
                "    @staticmethod\n"
                "    @amp.custom_fwd\n"
                "    def forward(ctx, x):\n"
                "        ctx.save_for_backward(x)\n"
                "        return x * x\n"
                "\n"
                "    @staticmethod\n"
                "    @amp.custom_bwd\n"
                "    def backward(ctx, g):\n"
                "        (x,) = ctx.saved_tensors\n"
                "        return 2 * x * g\n"
                "\n"
                "\n"
                "def run(x, use_amp):\n"
                "    with amp.autocast(use_amp):\n"
                "        return Square.apply(x)\n"
            ),
            lines=(7, 13, 20),
            fixed=(
                "from torch.autograd import Function\n"
                "import torch\n"
                "\n"
                "\n"
                "class Square(Function):\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_fwd(device_type="cuda")\n'
                "    def forward(ctx, x):\n"
                "        ctx.save_for_backward(x)\n"
                "        return x * x\n"
                "\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_bwd(device_type="cuda")\n'
                "    def backward(ctx, g):\n"
                "        (x,) = ctx.saved_tensors\n"
                "        return 2 * x * g\n"
                "\n"
                "\n"
                "def run(x, use_amp):\n"
                '    with torch.amp.autocast("cuda", enabled=use_amp):\n'
                "        return Square.apply(x)\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "def step(x, w):\n"
        '    with torch.amp.autocast("cuda"):\n'
        "        return x @ w\n",
        "import torch\n"
        'scaler = torch.amp.GradScaler("cuda")\n',
        "from torch.amp import autocast\n"
        "def step(x, w):\n"
        '    with autocast("cuda", dtype=torch.float16):\n'
        "        return x @ w\n",
        # a project's own `amp` helper
        "import amp\n"
        "def step(x, w):\n"
        "    with amp.autocast():\n"
        "        return x @ w  # torch.cuda.amp is not involved\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        qual = self.ctx.qualname(node.func)
        if qual is None or not qual.startswith("torch.cuda") or self._ambiguous(node.func) or self._old_torch_branch():
            return
        if qual in _CUDA_AUTOCAST:
            self._autocast(node)
        elif qual in _CUDA_SCALER:
            fix = self.fix()
            new = node.with_changes(
                func=fix.ref("torch.amp.GradScaler"), args=[_cuda_arg(bool(node.args))] + list(node.args)
            )
            fix.replace(node, new)
            self.report(
                node, fix, old="torch.cuda.amp.GradScaler(...)", new='torch.amp.GradScaler("cuda", ...)', why=_WARNS
            )
        elif qual in _CUDA_FWD or qual in _CUDA_BWD:
            self._custom(node, node, qual)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if isinstance(expr, (cst.Name, cst.Attribute)):
            qual = self.ctx.qualname(expr)
            if (qual in _CUDA_FWD or qual in _CUDA_BWD) and not self._ambiguous(expr) and not self._old_torch_branch():
                self._custom(expr, None, qual)

    def _old_torch_branch(self) -> bool:
        """Whether the node is in a branch of a torch-version test (`torch.amp.GradScaler(...) if
        TORCH_GE_2_4 else torch.cuda.amp.GradScaler()`, `if version.parse(torch.__version__) <
        version.parse("2.4"): ...`) or in the `except` of a `try` that uses the new spelling: the
        author already chose per version, and the code that keeps `torch.cuda.amp` is what only
        old torch runs, where the `torch.amp` spelling does not exist, so it is neither
        deprecated there nor rewritable."""
        stack = self.ctx.stack
        code = self.ctx.module.code_for_node
        return any(
            (
                isinstance(node, (cst.If, cst.IfExp))
                and (inner is node.orelse or inner is node.body)
                and _VERSION_TEST.search(code(node.test)) is not None
            )
            or (
                # `try: torch.amp.GradScaler(...)` / `except AttributeError: torch.cuda.amp...`
                isinstance(node, cst.Try)
                and isinstance(inner, cst.ExceptHandler)
                and _NEW_AMP.search(code(node.body)) is not None
            )
            for node, inner in zip(stack, stack[1:])
        )

    def _ambiguous(self, expr: cst.BaseExpression) -> bool:
        """Whether the name `expr` starts with is bound at module level in more than one way
        (`try: from torch.cuda.amp import autocast` / `except ImportError: from torch.amp import
        autocast`, or per torch version): which binding runs is not known here, and rewriting
        the call for one breaks the other, so such a name is not reported."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        if self._bindings is None:
            self._bindings = _module_bindings(self.ctx.module.body)
        return isinstance(expr, cst.Name) and len(self._bindings.get(expr.value, ())) > 1

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """`from torch.cuda.amp import autocast` (or `from torch.cuda import amp`) that nothing
        uses any more, typically once the calls were rewritten: the import goes too, so a fixed
        file does not trip an unused-import check."""
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted(node.module)
        if module not in ("torch.cuda.amp", "torch.cuda") or self._may_be_needed_elsewhere():
            return
        used = self._names_used()
        unused = [
            alias
            for alias in node.names
            if (module == "torch.cuda" and dotted(alias.name) == "amp") or module == "torch.cuda.amp"
            if not used.get((alias.asname.name if alias.asname else alias.name).value, 0)  # type: ignore[union-attr]
        ]
        if not unused:
            return
        fix = self.fix()
        kept = [alias for alias in node.names if alias not in unused]
        line = self.ctx.parent if isinstance(self.ctx.parent, cst.SimpleStatementLine) else None
        block = self.ctx.stack[-3] if len(self.ctx.stack) > 2 else None
        if kept:
            fix.replace(node, node.with_changes(names=[*kept[:-1], kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]))
        elif line is not None and len(line.body) == 1 and isinstance(block, cst.IndentedBlock) and all(
            isinstance(s, cst.SimpleStatementLine) and all(isinstance(i, (cst.Import, cst.ImportFrom)) for i in s.body)
            for s in block.body
        ):
            fix.replace(node, cst.Pass())  # removing every import of `if x:` would leave it empty
        elif line is not None and len(line.body) == 1:
            fix.remove_line(line)
        else:
            fix = None
        names = ", ".join(dotted(alias.name) for alias in unused)
        self.report(node, fix, old=f"from {module} import {names}", new="torch.amp", why=" (and unused here)")

    def _may_be_needed_elsewhere(self) -> bool:
        """An import that other code may read even where this file does not: a package's
        `__init__.py` or a name in `__all__` (a re-export), a class body (an attribute), a `try`
        body (an availability probe: removing it changes what the `try` tests)."""
        if os.path.basename(self.ctx.path) == "__init__.py" or self.ctx.mentions("__all__"):
            return True
        return any(isinstance(node, (cst.ClassDef, cst.Try)) for node in self.ctx.stack)

    def _names_used(self) -> Dict[str, int]:
        """How often each name is read in the file, imports left out (once per file)."""
        if self._used is None:
            counts: Dict[str, int] = {}

            class _Count(Visitor):
                def visit_Import(self, node) -> bool:
                    return False

                visit_ImportFrom = visit_Import

                def visit_Attribute(self, node: cst.Attribute) -> bool:
                    self.walk(node.value)  # `torch.amp.autocast` does not read a name `autocast`
                    return False

                def visit_Arg(self, node: cst.Arg) -> bool:
                    self.walk(node.value)  # nor does a keyword `autocast=...`
                    return False

                def visit_Name(self, node: cst.Name) -> None:
                    counts[node.value] = counts.get(node.value, 0) + 1

            _Count().walk(self.ctx.module)
            self._used = counts
        return self._used

    def _custom(self, node: cst.BaseExpression, call: Optional[cst.Call], qual: str) -> None:
        short = "custom_fwd" if qual in _CUDA_FWD else "custom_bwd"
        fix = self.fix()
        func = fix.ref(f"torch.amp.{short}")
        args = list(call.args) if call is not None else []
        if any(a.star == "**" for a in args):
            fix = None
        else:
            positional = [a for a in args if a.keyword is None and not a.star]
            rest = [a for a in args if a.keyword is not None or a.star]
            device = keyword_arg("device_type", _CUDA, comma=bool(rest))
            if positional:
                positional[-1] = positional[-1].with_changes(comma=_COMMA)
            new = cst.Call(func=func, args=positional + [device] + rest)
            if call is not None:
                new = call.with_changes(func=func, args=new.args)
            fix.replace(node, new)
        self.report(node, fix, old=f"torch.cuda.amp.{short}", new=f'torch.amp.{short}(device_type="cuda", ...)', why=_WARNS)

    def _autocast(self, node: cst.Call) -> None:
        fix: Optional = self.fix()
        args: List[cst.Arg] = []
        positional = 0
        for arg in node.args:
            if arg.star == "*":
                fix = None
                break
            if arg.keyword is None and not arg.star:
                if positional >= len(_CUDA_AUTOCAST_PARAMS):
                    fix = None
                    break
                arg = as_keyword(arg, _CUDA_AUTOCAST_PARAMS[positional])
                positional += 1
            args.append(arg)
        if fix is not None:
            new = node.with_changes(func=fix.ref("torch.amp.autocast"), args=[_cuda_arg(bool(args))] + args)
            fix.replace(node, new)
        self.report(node, fix, old="torch.cuda.amp.autocast(...)", new='torch.amp.autocast("cuda", ...)', why=_WARNS)


__all__ = [
    "DeprecatedCudaAmp",
    "Fp16AutocastCustomOp",
    "Fp16WithoutGradScaler",
    "call_shape",
    "fp16_autocast",
]
