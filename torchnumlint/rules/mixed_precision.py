"""TNL3xx, mixed precision: custom ops under fp16 autocast, fp16 without a GradScaler, the
deprecated `torch.cuda.amp` spellings.

TNL301 and TNL302 read the project index (`torchnumlint/index.py`): which classes are project
`nn.Module`s / `autograd.Function`s, the fp16 hazards of their `forward`, where fp16 autocast
regions are and whether a GradScaler is constructed anywhere.

TNL301 reports a hazard once: at a call inside an fp16 autocast region when the project calls the
class there directly (`Fn.apply(x)`, `self.head(x)`, `m(x)`, `Head()(x)`), else at the hazardous op
in the Module's `forward` (naming an fp16 autocast site of the project), never both.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.index import (
    AUTOCAST_ALL,
    AUTOCAST_GENERIC,
    CUSTOM_FWD,
    ClassInfo,
    Hazard,
    ProjectIndex,
    Site,
    classify_autocast,
    is_cast_fp32,
)
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.names import dotted, is_no_grad_item
from torchnumlint.rules.rewrite import as_keyword, keyword_arg, with_keyword
from torchnumlint.walk import Visitor

_CUSTOM_BWD = ("torch.amp.custom_bwd", "torch.amp.autocast_mode.custom_bwd", "torch.cuda.amp.custom_bwd",
               "torch.cuda.amp.autocast_mode.custom_bwd")
_MODULE_METHODS = ("to", "cuda", "cpu", "train", "eval", "float", "requires_grad_")


# ---------------------------------------------------------------------------------------------
# Autocast regions and project classes as this file sees them


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


def fp16_autocast(ctx, expr: cst.BaseExpression) -> Optional[str]:
    """The device of an fp16 autocast call (`with` item or decorator), else None."""
    if not isinstance(expr, cst.Call):
        return None
    return classify_autocast(*call_shape(ctx, expr))


def _autocast_state(ctx, expr: cst.BaseExpression) -> Optional[str]:
    """"fp16" for an fp16 autocast, "other" for any other autocast (bf16, disabled), else None."""
    if not isinstance(expr, cst.Call) or ctx.qualname(expr.func) not in AUTOCAST_ALL:
        return None
    return "fp16" if fp16_autocast(ctx, expr) is not None else "other"


def fp16_region(ctx) -> Optional[Tuple[cst.Call, str]]:
    """The innermost autocast around the node being visited (a `with` item, or a decorator of an
    enclosing function), when it is fp16: (its call, device). Any rule may ask it of its `ctx`."""
    stack = ctx.stack
    for i in range(len(stack) - 2, -1, -1):
        node = stack[i]
        items: List[cst.BaseExpression] = []
        if isinstance(node, cst.With) and stack[i + 1] is node.body:
            items = [item.item for item in node.items]
        elif isinstance(node, cst.FunctionDef) and stack[i + 1] is node.body:
            items = [d.decorator for d in node.decorators]
        for item in items:
            state = _autocast_state(ctx, item)
            if state == "fp16":
                return item, fp16_autocast(ctx, item) or "cuda"  # type: ignore[return-value]
            if state == "other":
                return None
    return None


def class_ref(ctx, expr: cst.BaseExpression) -> Optional[Tuple[str, Optional[str]]]:
    """(simple name, qualified name) of a class reference, as the index looks it up."""
    if isinstance(expr, cst.Name):
        return expr.value, ctx.qualname(expr)
    if isinstance(expr, cst.Attribute):
        qual = ctx.qualname(expr)
        return (expr.attr.value, qual) if qual is not None else None
    return None


def _unwrap_module_methods(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`Net().to(device).train()` -> `Net()`."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _MODULE_METHODS
        and isinstance(expr.func.value, cst.Call)
    ):
        expr = expr.func.value
    return expr


def called_class(ctx, call: cst.Call) -> Optional[Tuple[str, ClassInfo]]:
    """The project class `call` runs: ("function", info) for `Fn.apply(...)`, ("module", info) for a
    call of a Module instance (`self.head(x)`, `m(x)`, `Head()(x)`, `m.forward(x)`)."""
    func = call.func
    if isinstance(func, cst.Name) and func.value not in ctx.imports.aliases:
        value = ctx.resolve(func)
        if isinstance(value, cst.Attribute) and value.attr.value == "apply":  # fn = Fn.apply
            func = value
    if isinstance(func, cst.Attribute) and func.attr.value == "apply":
        ref = class_ref(ctx, func.value)
        info = ctx.index.lookup(ref[0], ref[1], ctx.path) if ref else None
        return ("function", info) if info is not None and info.kind == "function" else None
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    value = func if isinstance(func, cst.Call) else ctx.resolve(func)
    value = _unwrap_module_methods(value)
    if not isinstance(value, cst.Call) or value is call:
        return None
    ref = class_ref(ctx, value.func)
    info = ctx.index.lookup(ref[0], ref[1], ctx.path) if ref else None
    return ("module", info) if info is not None and info.kind == "module" else None


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


def _site_text(site: Site) -> str:
    return f"{site.path}:{site.line}"


def _hazard_text(info: ClassInfo) -> str:
    first = info.fp16_hazards[0]
    more = len(info.fp16_hazards) - 1
    return f"{first.op} at {first.path}:{first.line}" + (f" (+{more} more)" if more else "")


# ---------------------------------------------------------------------------------------------
# TNL301


class Fp16AutocastCustomOp(Rule):
    code = "TNL301"
    name = "fp16-autocast-custom-op"
    message = "{what} under fp16 autocast ({where}): {advice}"
    rationale = (
        "CUDA autocast runs a list of ops in float32 (exp, log, pow, sum, softmax, the norms) and "
        "leaves the rest in float16, whose largest value is 65504 and smallest normal 6.1e-5. A "
        "custom `torch.autograd.Function` is invisible to autocast: its forward receives float16 "
        "inputs, and an exp normalisation there gave NaN in 10 of 32 rows forward and in all 32 "
        "gradient rows; the same Function with "
        "`@torch.amp.custom_fwd(device_type=\"cuda\", cast_inputs=torch.float32)` is finite. "
        "Likewise a project `nn.Module` whose forward uses ops autocast keeps in float16 and that "
        "overflow or underflow there (`x * x`, division, `sqrt`, `mean`, `var`/`std`, `sigmoid`, "
        "`masked_fill` with a constant beyond 65504, an explicit float16 dtype, an eps below "
        "6.1e-5) silently produces Inf/NaN once autocast feeds it float16. Fix the Function with "
        "`custom_fwd(cast_inputs=torch.float32)` (+ `custom_bwd`); compute the Module's risky part "
        "in a float32 island (`with torch.autocast(\"cuda\", enabled=False):` on `.float()` "
        "inputs) or autocast to bfloat16."
    )
    safety = Safety.SAFE
    needs_index = True
    needles = ("autocast", "forward")

    @classmethod
    def could_fire(cls, text: str, index: Optional[ProjectIndex] = None) -> bool:
        if "autocast" in text:
            return True
        # a Module's forward here, with an fp16 autocast elsewhere in the project
        return "forward" in text and index is not None and bool(index.autocast_sites)
    examples = (
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "class ExpNormalize(torch.autograd.Function):\n"
                "    @staticmethod\n"
                "    def forward(ctx, scores):\n"
                "        weights = scores.exp()\n"
                "        out = weights / weights.sum(dim=-1, keepdim=True)\n"
                "        ctx.save_for_backward(out)\n"
                "        return out\n"
                "\n"
                "    @staticmethod\n"
                "    def backward(ctx, grad_out):\n"
                "        (out,) = ctx.saved_tensors\n"
                "        return out * (grad_out - (grad_out * out).sum(dim=-1, keepdim=True))\n"
                "\n"
                "\n"
                "def step(x, w):\n"
                '    with torch.autocast("cuda"):\n'
                "        scores = x @ w\n"
                "        return ExpNormalize.apply(scores)\n"
            ),
            lines=(21,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "class ExpNormalize(torch.autograd.Function):\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
                "    def forward(ctx, scores):\n"
                "        weights = scores.exp()\n"
                "        out = weights / weights.sum(dim=-1, keepdim=True)\n"
                "        ctx.save_for_backward(out)\n"
                "        return out\n"
                "\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_bwd(device_type="cuda")\n'
                "    def backward(ctx, grad_out):\n"
                "        (out,) = ctx.saved_tensors\n"
                "        return out * (grad_out - (grad_out * out).sum(dim=-1, keepdim=True))\n"
                "\n"
                "\n"
                "def step(x, w):\n"
                '    with torch.autocast("cuda"):\n'
                "        scores = x @ w\n"
                "        return ExpNormalize.apply(scores)\n"
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
            lines=(18,),
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
                "def train_step(model, batch, optimizer, scaler):\n"
                "    with torch.cuda.amp.autocast():\n"
                "        loss = model(batch).mean()\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
            ),
            lines=(12, 13),
            fixed=None,
        ),
    )
    good = (
        # bf16 autocast: the range of fp32
        "import torch\n"
        "class ExpNormalize(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, s):\n"
        "        e = s.exp()\n"
        "        return e / e.sum(-1, keepdim=True)\n"
        "def step(x):\n"
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "        return ExpNormalize.apply(x)\n",
        # the Function casts its inputs to fp32
        "import torch\n"
        "class ExpNormalize(torch.autograd.Function):\n"
        "    @staticmethod\n"
        '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
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
        # no hazard in the Module's forward
        "import torch\n"
        "from torch import nn\n"
        "class Block(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        return torch.relu(self.fc(x)).sum(-1)\n"
        "def run(x):\n"
        '    with torch.autocast("cuda"):\n'
        "        return Block()(x)\n",
        # autocast disabled
        "import torch\n"
        "class Scale(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, s):\n"
        "        return s.exp()\n"
        "def step(x, amp):\n"
        '    with torch.autocast("cuda", enabled=False):\n'
        "        return Scale.apply(x)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.mentions("autocast"):
            return
        region = fp16_region(self.ctx)  # cheap (the ancestors), so it goes before name following
        if region is None:
            return
        found = called_class(self.ctx, node)
        if found is None:
            return
        kind, info = found
        if kind == "function" and info.protected:
            return
        if kind == "module" and not info.fp16_hazards:
            return
        site, device = region
        if kind == "function":
            fix = custom_fwd_fix(self, info, device)
            self.report(
                node,
                fix,
                what=f"custom autograd.Function `{info.name}` ({info.where}) gets float16 inputs",
                where=f"`{self.ctx.module.code_for_node(site)}`",
                advice=f'decorate its forward with `@torch.amp.custom_fwd(device_type="{device}", '
                "cast_inputs=torch.float32)`",
            )
        else:
            self.report(
                node,
                None,
                what=f"Module `{info.name}` runs {_hazard_text(info)} in float16",
                where=f"`{self.ctx.module.code_for_node(site)}`",
                advice="compute it in a float32 island or autocast to bfloat16",
            )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        index = self.ctx.index
        sites = index.fp16_sites()
        if not sites:
            return
        info = index.lookup(node.name.value, None, self.ctx.path)
        if info is None or info.path != self.ctx.path or info.kind != "module" or not info.fp16_hazards:
            return
        mine = [h for h in info.fp16_hazards if h.path == self.ctx.path]
        if not mine or index.called_in_region(info) or not index.constructed(info):
            return
        forward = _method(node, "forward")
        if forward is None:
            return
        site = next((s for s in sites if s.path == self.ctx.path), sites[0])
        for hazard, expr in self._hazard_nodes(forward, mine):
            fix = None
            advice = "compute it in a float32 island (`.float()` under autocast(enabled=False)) or use bfloat16"
            if hazard.apply_of is not None:
                fn = index.lookup(hazard.apply_of[0], hazard.apply_of[1], self.ctx.path)
                if fn is not None:
                    fix = custom_fwd_fix(self, fn, site.device)
                    advice = "decorate its forward with `@torch.amp.custom_fwd(cast_inputs=torch.float32)`"
            self.report(
                expr,
                fix,
                what=f"{hazard.op} in `{info.name}.forward` runs in float16",
                where=_site_text(site),
                advice=advice,
            )

    def _hazard_nodes(self, forward: cst.FunctionDef, hazards: List[Hazard]):
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


class Fp16WithoutGradScaler(Rule):
    code = "TNL302"
    name = "fp16-without-grad-scaler"
    message = (
        "fp16 autocast with `.backward()` but no GradScaler in the project: gradients below 6e-8 "
        "flush to 0; use `scaler = torch.amp.GradScaler(\"{device}\")` and "
        "`scaler.scale(loss).backward()`, or autocast to bfloat16"
    )
    rationale = (
        "Under float16 autocast the backward pass also runs in float16, whose smallest subnormal is "
        "6e-8: small gradients underflow to exactly 0 and the weights they belong to stop "
        "learning, silently. Measured: with a loss coefficient of 1e-9, 4096 of 4096 weight "
        "gradients were exactly 0; with a GradScaler none were. `torch.amp.GradScaler` multiplies "
        "the loss before backward and unscales (and skips steps with Inf) afterwards. bfloat16 "
        "has the exponent range of float32 and needs no scaler."
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
                "            loss = loss_fn(model(x), y)\n"
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
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._backwards: Optional[Tuple[bool, bool]] = None

    def _backward_calls(self) -> Tuple[bool, bool]:
        """(the file calls backward, one of those is `scaler.scale(loss).backward()`), once per file:
        a scaler handed in as an argument is used without being constructed here."""
        if self._backwards is None:
            ctx = self.ctx
            plain: List[bool] = []
            scaled: List[bool] = []

            class _Find(Visitor):
                def visit_Call(self, node: cst.Call) -> None:
                    func = node.func
                    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                        inner = func.value
                        is_scaled = (
                            isinstance(inner, cst.Call)
                            and isinstance(inner.func, cst.Attribute)
                            and inner.func.attr.value == "scale"
                        )
                        (scaled if is_scaled else plain).append(True)
                    elif ctx.qualname(func) == "torch.autograd.backward":
                        plain.append(True)

            _Find().walk(ctx.module)
            self._backwards = (bool(plain or scaled), bool(scaled))
        return self._backwards

    def _check(self, items: Sequence[cst.BaseExpression]) -> None:
        if self.ctx.index.has_scaler():
            return
        for item in items:
            device = fp16_autocast(self.ctx, item)
            if device is None:
                continue
            if any(is_no_grad_item(self.ctx.imports, other) for other in items) or self.ctx.in_no_grad():
                return
            has_backward, scaled = self._backward_calls()
            if has_backward and not scaled:
                self.report(item, None, device=device)

    def visit_With(self, node: cst.With) -> None:
        self._check([item.item for item in node.items])

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check([d.decorator for d in node.decorators])


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


class DeprecatedCudaAmp(Rule):
    code = "TNL306"
    name = "deprecated-cuda-amp"
    message = "`{old}` is deprecated (FutureWarning): use `{new}`"
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
        if qual in _CUDA_AUTOCAST:
            self._autocast(node)
        elif qual in _CUDA_SCALER:
            fix = self.fix()
            new = node.with_changes(
                func=fix.ref("torch.amp.GradScaler"), args=[_cuda_arg(bool(node.args))] + list(node.args)
            )
            fix.replace(node, new)
            self.report(node, fix, old="torch.cuda.amp.GradScaler(...)", new='torch.amp.GradScaler("cuda", ...)')
        elif qual in _CUDA_FWD or qual in _CUDA_BWD:
            self._custom(node, node, qual)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if isinstance(expr, (cst.Name, cst.Attribute)):
            qual = self.ctx.qualname(expr)
            if qual in _CUDA_FWD or qual in _CUDA_BWD:
                self._custom(expr, None, qual)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """`from torch.cuda.amp import autocast` (or `from torch.cuda import amp`) that nothing
        uses any more, typically once the calls were rewritten: the import goes too, so a fixed
        file does not trip an unused-import check."""
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted(node.module)
        if module not in ("torch.cuda.amp", "torch.cuda"):
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
        if kept:
            fix.replace(node, node.with_changes(names=[*kept[:-1], kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]))
        elif line is not None and len(line.body) == 1:
            fix.remove_line(line)
        else:
            fix = None
        names = ", ".join(dotted(alias.name) for alias in unused)
        self.report(node, fix, old=f"from {module} import {names}", new="torch.amp (this import is unused)")

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
        self.report(node, fix, old=f"torch.cuda.amp.{short}", new=f'torch.amp.{short}(device_type="cuda", ...)')

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
        self.report(node, fix, old="torch.cuda.amp.autocast(...)", new='torch.amp.autocast("cuda", ...)')


__all__ = [
    "AUTOCAST_GENERIC",
    "DeprecatedCudaAmp",
    "Fp16AutocastCustomOp",
    "Fp16WithoutGradScaler",
    "call_shape",
    "called_class",
    "fp16_autocast",
    "fp16_region",
    "is_cast_fp32",
]
