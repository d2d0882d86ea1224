"""The project pre-pass (torchnumlint/index.py): the facts it records. What of a forward's facts
is an fp16 hazard is TNL301's decision (`rules/mixed_precision/forward_hazards.py`); the tests
here that ask it check that the facts carry what the decision needs."""

import pickle
import subprocess
import sys

from torchnumlint import index as index_module
from torchnumlint.forward_facts import BinOp, Binding, Call, Name, Number, Other, Span
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.rules.mixed_precision.forward_hazards import forward_hazards

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


def _calls(forward, method):
    return [e for e in forward.exprs if isinstance(e, Call) and e.method == method]


def test_module_classes_their_forward_facts_and_the_rules_decision():
    index = _index()
    head = index.lookup("Head", None, "models.py")
    assert head.kind == "module"
    # facts: `self.eps` holds 1e-8 from __init__; the forward divides by `h.std(...) + self.eps`
    assert head.forward.init_numbers == {"eps": 1e-8}
    (division,) = [e for e in head.forward.exprs if isinstance(e, BinOp) and e.op == "Div"]
    denominator = head.forward.exprs[division.right]
    line = MODELS.splitlines()[11]
    start, stop = line.index("h.std"), line.index("self.eps") + len("self.eps")
    assert denominator.op == "Add" and denominator.span == Span(12, start, 12, stop)
    assert _calls(head.forward, "std")
    # the decision: under CUDA autocast that eps is 0 in float16
    assert [(h.span.line, h.span.col) for h in forward_hazards(head)] == [(12, start)]
    assert forward_hazards(head)[0].what.startswith("eps 1e-08 rounds to 0")
    plain = index.lookup("Plain", None, "models.py")
    assert plain.kind == "module" and _calls(plain.forward, "relu") and forward_hazards(plain) == []
    sub = index.lookup("Sub", None, "models.py")
    assert sub.kind == "module" and sub.forward is None  # it runs Head's forward, recorded there
    fn = index.lookup("Fn", None, "models.py")
    assert _calls(fn.forward, "exp") and forward_hazards(fn) == []  # exp runs in fp32 under CUDA autocast


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
    assert forward_hazards(index.lookup("Square", None, "net.py"))[0].what.startswith("`x * x` product")


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
    info = build_index([("h.py", text)]).lookup("H", None, "h.py")
    (square,) = [e for e in info.forward.exprs if isinstance(e, BinOp) and e.op == "Mult"]
    col = text.splitlines()[6].index("h * h")
    assert square.span == Span(7, col, 7, col + 5)
    assert [tuple(h.span[:2]) for h in forward_hazards(info)] == [(7, col)]


GATE = """\
import torch
from torch import nn
from . import _C


class Gate(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.scale = 2.0

    def forward(self, h, mask, eps=1e-8, k: int = 2):
        with torch.autocast("cuda", enabled=False):
            ref = h.float()
        s = h.to(torch.float32)
        e = h * h
        return _C.gate(h.masked_fill(mask, value=-1e9) / (s + eps), k)
"""


def test_forward_facts_are_what_the_code_does():
    forward = build_index([("gate.py", GATE)]).lookup("Gate", None, "gate.py").forward
    exprs = forward.exprs
    # parameters that may hold tensors, the numbers the rest default to, numbers set in __init__
    assert forward.params == {"h", "mask"}
    assert forward.defaults == {"eps": 1e-8, "k": 2.0}
    assert forward.init_numbers == {"eps": 1e-6, "scale": 2.0}
    # a square: both factors the same code
    (square,) = [e for e in exprs if isinstance(e, BinOp) and e.op == "Mult"]
    assert square.same and exprs[square.left] == Name("h") and square.span == Span(16, 12, 16, 17)
    # a fill constant with its number, by keyword
    (fill,) = _calls(forward, "masked_fill")
    assert dict(fill.keywords).keys() == {"value"} and exprs[dict(fill.keywords)["value"]] == Number(-1e9)
    # an explicit dtype
    (cast,) = _calls(forward, "to")
    assert cast.qual is None and cast.dtypes == ("torch.float32",)
    # an eps next to the division it guards
    (division,) = [e for e in exprs if isinstance(e, BinOp) and e.op == "Div"]
    guard = exprs[division.right]
    assert guard.op == "Add" and exprs[guard.left] == Name("s") and exprs[guard.right] == Name("eps")
    # a compiled extension kernel
    (kernel,) = _calls(forward, "gate")
    assert kernel.kernel == "_C.gate" and exprs[kernel.args[1]] == Name("k")
    # the island: a `with` under an autocast that is not float16, and what it binds
    assert [b for b in forward.bindings if b.island] == [Binding("ref", forward.bindings[0].value, True)]
    assert isinstance(exprs[forward.bindings[0].value], Call)
    ((start, stop),) = forward.islands
    assert {e.method for e in exprs[start:stop] if isinstance(e, Call)} == {"autocast", "float"}
    assert all(not forward.in_island(i) for i in range(len(exprs)) if exprs[i] in (square, fill, cast, division))
    assert not forward.cast_inputs_fp32 and not forward.under_island


def test_tnl301_decides_from_the_facts():
    """The square and the fill are hazards; the eps guards `s`, cast to float32; a kernel call
    counts only in an autograd.Function; the island is float32 (or bfloat16) code."""
    gate = build_index([("gate.py", GATE)]).lookup("Gate", None, "gate.py")
    assert [(h.span, h.what) for h in forward_hazards(gate)] == [
        (Span(16, 12, 16, 17), "`x * x` product (overflows float16 once |x| > 255)"),
        (Span(17, 23, 17, 54), "`masked_fill` with -1e+09 (beyond the float16 range, 65504)"),
    ]


def test_the_index_records_what_is_no_hazard_too():
    """Facts do not depend on the policy: a square of a float32 value, a fill float16 holds and a
    large eps are recorded as such, and only the rule lets them go."""
    code = """\
import torch
from torch import nn


class Calm(nn.Module):
    def forward(self, h, eps=1e-4):
        e = h.exp()
        return (e * e).masked_fill(h < 0, -1e4) / (h.abs() + eps)
"""
    info = build_index([("calm.py", code)]).lookup("Calm", None, "calm.py")
    exprs = info.forward.exprs
    assert any(isinstance(e, BinOp) and e.op == "Mult" and e.same for e in exprs)
    assert Number(-1e4) in exprs and info.forward.defaults == {"eps": 1e-4}
    assert any(isinstance(e, Other) for e in exprs)  # the comparison `h < 0`
    assert forward_hazards(info) == []


def test_forward_facts_of_any_depth_record_and_pickle_without_recursion():
    """A product of 2000 factors (generated code) nests as deep as `ast.parse` goes: recording,
    pickling and judging it must not recurse that deep."""
    terms = " * ".join(["h"] * 2000)
    code = f"import torch\nfrom torch import nn\n\n\nclass Deep(nn.Module):\n    def forward(self, h):\n        s = {terms}\n        return s * s\n"
    index = build_index([("deep.py", code)])
    again = pickle.loads(pickle.dumps(index))
    assert again == index
    info = again.lookup("Deep", None, "deep.py")
    assert len(info.forward.exprs) == 1 + 1999 + 2000 + 3  # `s =`, the products, their factors, `s * s`
    squares = [e for e in info.forward.exprs if isinstance(e, BinOp) and e.same]
    assert [e.span.line for e in squares] == [7, 8]  # the innermost `h * h`, and `s * s`
    assert [h.span.line for h in forward_hazards(info)] == [7, 8]


def test_the_index_loads_without_libcst():
    """The pre-pass runs over every project file before any rule: it must stay `ast`-only."""
    script = "import sys, torchnumlint.index\nprint('libcst' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
