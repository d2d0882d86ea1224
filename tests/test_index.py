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
    assert empty.classes == {} and empty.autocast_sites == [] and not empty.has_scaler()


def test_module_classes_and_their_hazards():
    index = _index()
    head = index.lookup("Head", None, "models.py")
    assert head.kind == "module"
    assert [(h.op, h.path, h.line) for h in head.fp16_hazards] == [("`/` division", "models.py", 12)]
    assert index.lookup("Plain", None, "models.py").kind == "module"
    assert index.lookup("Plain", None, "models.py").fp16_hazards == []
    sub = index.lookup("Sub", None, "models.py")
    assert sub.kind == "module" and [h.line for h in sub.fp16_hazards] == [12]
    uses = index.lookup("UsesFn", None, "models.py")
    assert [h.op for h in uses.fp16_hazards] == ["custom autograd.Function `Fn.apply`"]


def test_functions_and_custom_fwd():
    index = _index()
    assert index.lookup("Fn", None, "models.py").kind == "function"
    assert not index.lookup("Fn", None, "models.py").protected
    assert index.lookup("Safe", None, "models.py").protected


def test_autocast_sites_are_fp16_only():
    sites = [(s.path, s.line, s.device) for s in _index().fp16_sites()]
    assert sites == [("train.py", 7, "cuda"), ("train.py", 13, "cuda"), ("train.py", 18, "cuda")]


def test_grad_scaler_and_region_calls():
    index = _index()
    assert [(s.path, s.line) for s in index.scaler_sites] == [("train.py", 23)]
    assert index.called_in_region(index.lookup("Head", None, "models.py"))
    assert ("train.py", "Head", "models.Head") in index.region_calls


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


def test_picklable_and_mergeable():
    index = _index()
    again = pickle.loads(pickle.dumps(index))
    assert again == index
    merged = build_index([("models.py", MODELS)]).merge(build_index([("train.py", TRAIN)]))
    assert merged.lookup("UsesFn", None, "models.py").fp16_hazards[0].line == 39
    assert len(merged.fp16_sites()) == 3 and merged.has_scaler()
    assert merged.called_in_region(merged.lookup("Head", None, "models.py"))


def test_non_ascii_columns_are_characters():
    text = 'import torch\nfrom torch import nn\n\n\nclass H(nn.Module):\n    def forward(self, h):\n        return "é" + h.sigmoid()\n'
    hazard = build_index([("h.py", text)]).lookup("H", None, "h.py").fp16_hazards[0]
    assert (hazard.line, hazard.col) == (7, text.splitlines()[6].index("h.sigmoid"))
