"""The project pre-pass (torchnumlint/index.py)."""

import pickle

from torchnumlint import index as index_module
from torchnumlint.index import ProjectIndex, build_index

MODELS = """\
import torch
import torch.nn as nn
from torch.nn import Module


class Head(nn.Module):
    def __init__(self, eps=1e-8):
        super().__init__()
        self.eps = eps

    def forward(self, h):
        return h / (h.std(-1, keepdim=True) + self.eps)


class Plain(Module):
    def forward(self, h):
        return torch.relu(h)


class Sub(Head):
    pass


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.exp()


class Safe(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        return x.exp()


class UsesFn(torch.nn.Module):
    def forward(self, x):
        return Fn.apply(x) + Safe.apply(x)
"""

TRAIN = """\
import torch
from torch.cuda.amp import GradScaler, autocast
from models import Head


def step(model, x):
    with torch.autocast("cuda"):
        a = Head()(x)
    with torch.autocast("cpu"):
        b = model(x)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        c = model(x)
    with autocast():
        d = model(x)
    return a + b + c + d


@torch.amp.autocast(device_type="cuda", dtype=torch.float16)
def infer(model, x):
    return model(x)


scaler = GradScaler()
"""


def _index():
    return build_index([("models.py", MODELS), ("train.py", TRAIN)])


def test_empty():
    empty = ProjectIndex.empty()
    assert empty.classes == {} and empty.regions == [] and empty.reached == {} and not empty.has_scaler()


def test_module_classes_and_their_hazards():
    index = _index()
    head = index.lookup("Head", None, "models.py")
    assert head.kind == "module"
    assert [(h.path, h.line) for h in head.hazards] == [("models.py", 12)]
    assert head.hazards[0].op.startswith("eps 1e-08 rounds to 0")
    assert index.lookup("Plain", None, "models.py").kind == "module"
    assert index.lookup("Plain", None, "models.py").hazards == []
    assert index.lookup("Sub", None, "models.py").kind == "module"
    assert index.lookup("Fn", None, "models.py").hazards == []  # exp runs in fp32 under CUDA autocast


def test_functions_and_custom_fwd():
    index = _index()
    assert index.lookup("Fn", None, "models.py").kind == "function"
    assert not index.lookup("Fn", None, "models.py").protected
    assert index.lookup("Safe", None, "models.py").protected


def test_autocast_sites_are_fp16_only():
    sites = [(s.path, s.line, s.device) for s in _index().fp16_sites()]
    assert sites == [("train.py", 7, "cuda"), ("train.py", 13, "cuda"), ("train.py", 18, "cuda")]


def test_grad_scaler_and_what_regions_reach():
    index = _index()
    assert [(s.path, s.line) for s in index.scaler_sites] == [("train.py", 23)]
    assert index.reached_by(index.lookup("Head", None, "models.py")).where == "train.py:7"
    assert index.reached_by(index.lookup("UsesFn", None, "models.py")) is None  # `model` is handed in


def test_call_graph_follows_methods_attributes_builders_and_applies():
    code = """\
import torch
from torch import nn


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x


square = Square.apply


class Block(nn.Module):
    def forward(self, x):
        return square(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])

    def forward(self, x):
        return self.run_blocks(x)

    def run_blocks(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def build():
    return Net()


def step(x, args):
    model = build()
    with torch.autocast("cuda", enabled=args.amp):
        return model(x)
"""
    index = build_index([("net.py", code)])
    site = index.reached_by(index.lookup("Square", None, "net.py"))
    assert (site.where, site.opt_in) == ("net.py:39", True)
    assert index.reached_by(index.lookup("Net", None, "net.py"), "run_blocks") is not None
    assert index.lookup("Square", None, "net.py").hazards[0].op.startswith("`x * x` product")


def test_lookup_resolves_imports_and_refuses_torch_and_ambiguity():
    index = build_index([("pkg/a/heads.py", MODELS), ("pkg/b/heads.py", MODELS)])
    assert index.lookup("Head", "pkg.a.heads.Head", "x.py").path == "pkg/a/heads.py"
    assert index.lookup("Head", "pkg.b.heads.Head", "x.py").path == "pkg/b/heads.py"
    assert index.lookup("Head", None, "x.py") is None  # two candidates
    assert index.lookup("Head", None, "pkg/b/heads.py").path == "pkg/b/heads.py"
    assert index.lookup("Module", "torch.nn.Module", "x.py") is None


def test_files_that_cannot_matter_are_not_parsed(monkeypatch):
    parsed = []
    real = index_module.ast.parse

    def spy(text, *args, **kwargs):
        parsed.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(index_module.ast, "parse", spy)
    index = build_index([("util.py", "def add(a, b):\n    return a + b\n"), ("models.py", MODELS)])
    assert parsed == [MODELS]
    assert index.files == 1


def test_syntax_error_file_is_skipped():
    index = build_index([("broken.py", "class Head(nn.Module:\n    def forward(\n"), ("models.py", MODELS)])
    assert index.files == 1
    assert index.lookup("Head", None, "models.py") is not None


def test_picklable_mergeable_and_replaceable_per_file():
    index = _index()
    again = pickle.loads(pickle.dumps(index))
    assert again == index
    merged = build_index([("models.py", MODELS)]).merge(build_index([("train.py", TRAIN)]))
    assert len(merged.fp16_sites()) == 3 and merged.has_scaler()
    assert merged.reached == index.reached
    replaced = index.with_file("train.py", TRAIN.replace('torch.autocast("cuda")', 'torch.autocast("cpu")'))
    assert replaced.reached_by(replaced.lookup("Head", None, "models.py")) is None


def test_non_ascii_columns_are_characters():
    text = 'import torch\nfrom torch import nn\n\n\nclass H(nn.Module):\n    def forward(self, h):\n        return "é" + h * h\n'
    hazard = build_index([("h.py", text)]).lookup("H", None, "h.py").hazards[0]
    assert (hazard.line, hazard.col) == (7, text.splitlines()[6].index("h * h"))
