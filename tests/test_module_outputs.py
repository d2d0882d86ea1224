"""Module outputs are tensors (issue 16 item 4, for TNL301): what `self.proj(x)`, a project
module's call or a torch layer gives under CUDA fp16 autocast, read once (`rules/module_outputs.py`)
by the project index's judge and by the LibCST rules (`amp.submodule_output`)."""

import textwrap

import libcst as cst
import pytest

from torchnumlint.context import FileContext
from torchnumlint.engine import lint_text
from torchnumlint.index import build_index
from torchnumlint.rules import amp
from torchnumlint.rules.module_outputs import layer_output
from torchnumlint.rules.registry import registry

RULES = registry()

BLOCKS = """\
import torch
from torch import nn


class ConvUnit(nn.Module):
    default_act = nn.SiLU()

    def __init__(self, c1, c2, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class EnergyGate(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.unit = ConvUnit(dim, dim)

    def forward(self, x, feats):
        h = self.proj(x)
        energy = h * h
        n = self.norm(x)
        spread = n * n
        u = self.unit(feats)
        return energy.mean() + spread.mean() + (u * u).mean()
"""

TRAIN = """\
import torch

from models.blocks import EnergyGate


def train(loader, dim):
    model = EnergyGate(dim)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cuda")
    for x, feats in loader:
        with torch.autocast("cuda"):
            loss = model(x, feats)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
"""


def findings(path, text, index):
    return [(f.line, f.message) for f in lint_text(path, text, [RULES["TNL301"]], index=index)]


def test_submodule_outputs_are_float16_tensors_across_files():
    """`self.proj(x) ** 2` as `h * h` (Linear: float16) and the square of a project conv unit
    (Conv2d -> BatchNorm2d -> SiLU: float16 throughout) are found, citing the loop; the square of
    a LayerNorm output (float32 under autocast) is not."""
    index = build_index([("models/blocks.py", BLOCKS), ("train.py", TRAIN)])
    found = findings("models/blocks.py", BLOCKS, index)
    assert [line for line, _ in found] == [27, 31]
    assert all("train.py:11" in message for _, message in found)
    assert findings("train.py", TRAIN, index) == []


def test_unknown_submodules_are_no_evidence():
    """A submodule handed in (`self.body = body`), or one that may be a LayerNorm or a Linear,
    gives nothing known: its square is not reported."""
    code = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Wrapper(nn.Module):
            def __init__(self, body, dim, norm=True):
                super().__init__()
                self.body = body
                self.pre = nn.LayerNorm(dim) if norm else nn.Linear(dim, dim)

            def forward(self, x):
                h = self.body(x)
                p = self.pre(x)
                return (h * h).mean() + (p * p).mean()


        def run(body, x, dim):
            with torch.autocast("cuda"):
                return Wrapper(body, dim)(x)
        """
    )
    assert findings("w.py", code, build_index([("w.py", code)])) == []


def test_no_region_no_finding():
    """The same modules never run under fp16 autocast: nothing is reported."""
    train = TRAIN.replace('        with torch.autocast("cuda"):\n            loss', "        if True:\n            loss")
    index = build_index([("models/blocks.py", BLOCKS), ("train.py", train)])
    assert findings("models/blocks.py", BLOCKS, index) == []


@pytest.mark.parametrize(
    "qual, kind",
    [
        ("torch.nn.Linear", "fp16"),
        ("torch.nn.modules.conv.Conv2d", "fp16"),
        ("torch.nn.LayerNorm", "fp32"),
        ("torch.nn.Embedding", "fp32"),
        ("torch.nn.SiLU", "keep"),
        ("torch.nn.BatchNorm2d", "keep"),
        ("torch.nn.Sequential", None),
        ("models.common.Conv", None),
        (None, None),
    ],
)
def test_layer_output(qual, kind):
    assert layer_output(qual) == kind


def test_libcst_reader_agrees_with_the_index():
    """`amp.submodule_output` on LibCST nodes: torch layers by their op, a project module by the
    index's judge of its forward, an unknown call None."""
    index = build_index([("models/blocks.py", BLOCKS)])
    module = cst.parse_module(BLOCKS)
    ctx = FileContext("models/blocks.py", BLOCKS, module, index=index)
    seen = {}

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node):
            text = module.code_for_node(node)
            if text.startswith("self.") and "(" in text:
                with ctx.visiting(stack + [node]):
                    seen[text] = amp.submodule_output(ctx, node)

    stack = []
    gate = next(s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == "EnergyGate")
    forward = next(s for s in gate.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward")
    stack = [module, gate, forward]
    forward.visit(Calls())
    assert seen["self.proj(x)"] == "fp16"
    assert seen["self.norm(x)"] == "fp32"
    assert seen["self.unit(feats)"] == "fp16"
