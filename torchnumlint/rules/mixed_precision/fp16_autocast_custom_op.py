"""TNL301 fp16-autocast-custom-op: what an fp16 autocast region runs in float16 that overflows.

Reads the project index (`torchnumlint/index.py`): which classes are project `nn.Module`s /
`autograd.Function`s, what their `forward` computes (recorded facts), and which forwards an fp16
autocast region reaches through the project's call graph. Which of those computations overflow
in float16 is this rule's decision, made under the CUDA autocast policy in `forward_hazards.py`.
Reports at the hazardous op in the forward of what a region reaches (a Function once, with its
fix), citing the region; a forward no region reaches is not reported, however risky: most models
are handed to a training loop whose precision the linter cannot see.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.amp import decorator_qualname, find_class, find_method
from torchnumlint.rules.autocast import CUSTOM_BWD, CUSTOM_FWD
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.fp16_code import region_text
from torchnumlint.rules.ownership import owned_elsewhere
from torchnumlint.rules.mixed_precision.forward_hazards import Hazard, forward_hazards
from torchnumlint.rules.rewrite import with_keyword
from torchnumlint.walk import Visitor

if TYPE_CHECKING:
    from torchnumlint.index import ClassInfo, ProjectIndex
    from torchnumlint.rules.candidate_tree import CandidateTree


def custom_fwd_fix(rule: Rule, info: "ClassInfo", device: str):
    """Add `@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)` to the Function's
    forward (and `@torch.amp.custom_bwd(device_type=...)` to its backward), just under
    `@staticmethod`; or `cast_inputs=` to a custom_fwd already there. None when not possible."""
    ctx = rule.ctx
    if info.path != ctx.path:
        return None
    cls = find_class(ctx.module, info.name)
    forward = find_method(cls, "forward") if cls is not None else None
    if forward is None:
        return None
    fix = rule.fix()
    code = ctx.module.code_for_node
    float32 = code(fix.ref("torch.float32"))
    existing = [d for d in forward.decorators if decorator_qualname(ctx, d) in CUSTOM_FWD]
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
    backward = find_method(cls, "backward")  # type: ignore[arg-type]  # not None: `forward` was found in it above
    if backward is not None and not any(decorator_qualname(ctx, d) in CUSTOM_BWD for d in backward.decorators):
        _insert_under_staticmethod(fix, backward, f'{code(fix.ref("torch.amp.custom_bwd"))}(device_type="{device}")')
    return fix


def _insert_under_staticmethod(fix, func: cst.FunctionDef, text: str) -> bool:
    """Add the decorator `@text` just below the method's one `@staticmethod`."""
    static = [d for d in func.decorators if isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"]
    if len(static) != 1:
        return False
    fix.insert_line_after(static[0], f"@{text}")
    return True


# ---------------------------------------------------------------------------------------------
# TNL301


class Fp16AutocastCustomOp(Rule):
    code = "TNL301"
    name = "fp16-autocast-custom-op"
    finds = (
        "under fp16 autocast: a custom `autograd.Function` without "
        "`custom_fwd(cast_inputs=torch.float32)`, a project `nn.Module` whose forward overflows in "
        "fp16"
    )
    fix_summary = "safe for Functions: `@torch.amp.custom_fwd(...)`; modules: message"
    message = "{what} under fp16 autocast ({where}): {advice}"
    rationale = (
        "CUDA autocast runs a list of ops in float32 (exp, log, pow, sum, softmax, the norms) and "
        "leaves the rest in float16, whose largest value is 65504. A custom "
        "`torch.autograd.Function` runs its forward with autocast still on: its element-wise "
        "arithmetic gets float16 inputs, and so do compiled extension kernels it calls, which "
        "often assume float32. Measured: a Function whose forward squares a Gram matrix returned "
        "NaN rows under fp16 autocast (the square is Inf past 255); with "
        '`@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)` it is finite. '
        "Likewise a project `nn.Module` that an fp16 autocast region reaches through the call "
        "graph, whose forward computes what overflows or underflows in float16: `x * x` (Inf "
        "once |x| > 255), `var`, `masked_fill` with a constant beyond 65504, an eps added in float16 (below 2.98e-8 it rounds to 0; from 2.98e-8 up to "
        "1.53e-5 it is a subnormal whose reciprocal is Inf). Not hazards: ops CUDA runs in "
        "float32, `sigmoid`/`tanh`, `sqrt`, `mean` (accumulates in float32), Python-number "
        "arithmetic. Fix the Function with `custom_fwd(cast_inputs=torch.float32)` (+ "
        "`custom_bwd`); compute the Module's risky part in a float32 island "
        '(`with torch.autocast("cuda", enabled=False):` on `.float()` inputs) or autocast to '
        "bfloat16."
    )
    safety = Safety.SAFE
    needs_index = True
    needles = ("forward",)

    @classmethod
    def could_fire(cls, text: str, index: Optional["ProjectIndex"] = None) -> bool:
        # a forward here, reached from an fp16 autocast region somewhere in the project
        return "forward" in text and (index is None or bool(index.reached))

    @classmethod
    def tree_test(cls, tree: "CandidateTree", index: Optional["ProjectIndex"] = None) -> bool:
        # `visit_ClassDef` reports only inside a class whose own body defines `forward` (`find_method`)
        return any(
            isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == "forward"
            for node in tree.nodes(ast.ClassDef)
            for statement in node.body
        )

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
        if info is None or info.path != self.ctx.path or info.kind not in ("module", "function"):
            return
        site = index.reached_by(info)
        forward = find_method(node, "forward")
        if site is None or forward is None:
            return
        hazards = forward_hazards(info, index.lookup)
        owned = {kind for kind, site in (("fill", "fp16-fill"), ("eps", "fp16-eps")) if owned_elsewhere(self.ctx, self.code, site)}
        hazards = [h for h in hazards if h.kind not in owned]
        if not hazards:
            return
        found = self._hazard_nodes(forward, hazards)
        if info.kind == "function":
            hazard, expr = found[0]
            more = f" (+{len(hazards) - 1} more)" if len(hazards) > 1 else ""
            self.report(
                expr,
                custom_fwd_fix(self, info, site.device),
                what=f"custom autograd.Function `{info.name}` gets float16 inputs: {hazard.what}{more}",
                where=region_text(site),
                advice=f'decorate its forward with `@torch.amp.custom_fwd(device_type="{site.device}", cast_inputs=torch.float32)`',
            )
            return
        for hazard, expr in found:
            self.report(
                expr,
                None,
                what=f"{hazard.what} in `{info.name}.forward` runs in float16",
                where=region_text(site),
                advice="compute it in a float32 island (`.float()` under autocast(enabled=False)) or use bfloat16",
            )

    def _hazard_nodes(self, forward: cst.FunctionDef, hazards: List[Hazard]) -> List[Tuple[Hazard, cst.CSTNode]]:
        """The expressions the hazards (ast positions the index recorded) point at, in source order."""
        positions = self.ctx.positions
        wanted = {tuple(h.span): h for h in hazards}
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
