"""TNL301 / TNL302 / TNL306: the mixed-precision family, and the AMP vocabulary both the project
index and the rules read (`rules/autocast.py`)."""

import ast
import importlib.util
import subprocess
import sys
import textwrap

import libcst as cst
import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint import index as index_module
from torchnumlint.context import FileContext
from torchnumlint.engine import lint_text
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.rules import amp, autocast
from torchnumlint.rules.registry import registry

RULES = registry()

# A Function whose forward squares its input: Inf in float16 once |x| > 255. Line 7 is the hazard.
FN = """\
import torch


class Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s):
        return s * s

    @staticmethod
    def backward(ctx, g):
        return g
"""


def fn_fixed(device="cuda", fn=FN):
    """FN as TNL301's fix leaves it: inputs cast to float32 in the forward, custom_bwd on the backward."""
    return fn.replace(
        "    @staticmethod\n    def forward",
        f'    @staticmethod\n    @torch.amp.custom_fwd(device_type="{device}", cast_inputs=torch.float32)\n    def forward',
    ).replace(
        "    @staticmethod\n    def backward",
        f'    @staticmethod\n    @torch.amp.custom_bwd(device_type="{device}")\n    def backward',
    )


# A Module whose forward computes a float16 variance. Line 7 is the hazard.
HEAD = """\
import torch
from torch import nn


class Head(nn.Module):
    def forward(self, h):
        return h.var(-1)
"""


def lint(code, *codes, path="example.py", index=None):
    text = textwrap.dedent(code)
    return [(f.code, f.line) for f in lint_text(path, text, [RULES[c] for c in codes], index=index)]


def messages(code, *codes, path="example.py", index=None):
    return [f.message for f in lint_text(path, textwrap.dedent(code), [RULES[c] for c in codes], index=index)]


# ---------------------------------------------------------------------------------------------
# TNL301: a Function reached from an fp16 region

REGIONS = [
    '    with torch.autocast("cuda"):\n        return Energy.apply(x)\n',
    '    with torch.autocast(device_type="cuda", dtype=torch.float16):\n        return Energy.apply(x)\n',
    '    with torch.amp.autocast("cuda"):\n        return Energy.apply(x)\n',
    "    with torch.cuda.amp.autocast():\n        return Energy.apply(x)\n",
    '    with torch.autocast("cuda", torch.half):\n        return Energy.apply(x)\n',
    '    with torch.no_grad(), torch.autocast("cuda"):\n        return Energy.apply(x)\n',
    '    with torch.autocast("cuda"):\n        fn = Energy.apply\n        return fn(x)\n',
    # an autocast held in a name, and one built with functools.partial
    '    amp = torch.autocast("cuda")\n    with amp:\n        return Energy.apply(x)\n',
    '    ctx = functools.partial(torch.autocast, "cuda", dtype=torch.float16)\n    with ctx():\n        return Energy.apply(x)\n',
]
CPU_FP16 = '    with torch.autocast("cpu", dtype=torch.float16):\n        return Energy.apply(x)\n'


def _step(fn, call):
    return "import functools\n" + fn + "\n\ndef step(x):\n" + call


FUNCTION_FLAGGED = [
    *[Flagged(_step(FN, call), (8,), fixed=_step(fn_fixed(), call)) for call in REGIONS],
    Flagged(_step(FN, CPU_FP16), (8,), fixed=_step(fn_fixed("cpu"), CPU_FP16)),
    # a decorated function, through a module-level alias of the Function's apply
    Flagged(
        FN + '\n\nenergy = Energy.apply\n\n\n@torch.autocast("cuda")\ndef step(x):\n    return energy(x)\n',
        (7,),
        fixed=fn_fixed() + '\n\nenergy = Energy.apply\n\n\n@torch.autocast("cuda")\ndef step(x):\n    return energy(x)\n',
    ),
    # a compiled kernel in a Function without a backward of its own here
    Flagged(
        """\
        import torch
        from . import _C


        class RoIPool(torch.autograd.Function):
            @staticmethod
            def forward(ctx, feats, rois):
                return _C.roi_pool_forward(feats, rois)


        def pool(feats, rois):
            with torch.autocast("cuda"):
                return RoIPool.apply(feats, rois)
        """,
        (8,),
        fixed="""\
        import torch
        from . import _C


        class RoIPool(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
            def forward(ctx, feats, rois):
                return _C.roi_pool_forward(feats, rois)


        def pool(feats, rois):
            with torch.autocast("cuda"):
                return RoIPool.apply(feats, rois)
        """,
    ),
    # applied in the forward of a Module that a region reaches
    Flagged(
        FN + "\n\nclass Layer(torch.nn.Module):\n    def forward(self, x):\n        return Energy.apply(x)\n"
        '\n\ndef run(x):\n    model = Layer()\n    with torch.autocast("cuda"):\n        return model(x)\n',
        (7,),
        fixed=fn_fixed() + "\n\nclass Layer(torch.nn.Module):\n    def forward(self, x):\n        return Energy.apply(x)\n"
        '\n\ndef run(x):\n    model = Layer()\n    with torch.autocast("cuda"):\n        return model(x)\n',
    ),
    # a custom_fwd already there gets cast_inputs; the backward is left as it is
    Flagged(
        FN.replace(
            "    @staticmethod\n    def forward", '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda")\n    def forward'
        )
        + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n',
        (8,),
        fixed=FN.replace(
            "    @staticmethod\n    def forward",
            '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward',
        )
        + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n',
    ),
]

FUNCTION_SILENT = [
    *[
        Silent(FN + "\n\ndef step(x, device, amp_dtype):\n" + call)
        for call in [
            '    with torch.autocast("cuda", dtype=torch.bfloat16):\n        return Energy.apply(x)\n',
            '    with torch.autocast("cpu"):\n        return Energy.apply(x)\n',
            '    with torch.autocast("cuda", enabled=False):\n        return Energy.apply(x)\n',
            "    with torch.cuda.amp.autocast(enabled=False):\n        return Energy.apply(x)\n",
            "    with torch.cuda.amp.autocast(dtype=torch.bfloat16):\n        return Energy.apply(x)\n",
            "    with torch.autocast(device, dtype=amp_dtype):\n        return Energy.apply(x)\n",
            "    with torch.autocast(device):\n        return Energy.apply(x)\n",
            "    return Energy.apply(x)\n",
            '    with torch.autocast("cuda"):\n        with torch.autocast("cuda", enabled=False):\n'
            "            return Energy.apply(x.float())\n",
            '    with torch.autocast("cuda"):\n        y = x @ x\n    return Energy.apply(y.float())\n',
        ]
    ],
    # no fp16 hazard under the CUDA policy: exp and sum run in float32, and so does the division
    # of their results; bounded ops; a root; Python-number arithmetic
    *[
        Silent(FN.replace("return s * s", forward) + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n')
        for forward in [
            "e = s.exp()\n        return e / e.sum(-1, keepdim=True)",
            "return torch.sigmoid(s) * torch.tanh(s)",
            "return s.mean(-1) + torch.sqrt(s.abs())",
            "n = s.shape[-1]\n        return s / (n * n)",
        ]
    ],
    # the forward casts its inputs to float32, in either spelling
    *[
        Silent(
            FN.replace("    @staticmethod\n    def forward", f"    @staticmethod\n    @{deco}\n    def forward")
            + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
        )
        for deco in [
            'torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)',
            "torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)",
        ]
    ],
]


# A Function defined in one module, reached from a region in another: reported at its forward,
# with the fix, and the region named.
TRAIN_FN = 'import torch\nfrom ops import Energy\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
FUNCTION_PROJECTS = [
    harness.Project({"ops.py": FN, "train.py": TRAIN_FN}, {"ops.py": (7,)}, {"ops.py": fn_fixed()}, message="(train.py:6)"),
]


@pytest.mark.parametrize("code, case", harness.params("TNL301", FUNCTION_FLAGGED, FUNCTION_SILENT, FUNCTION_PROJECTS))
def test_tnl301_functions(code, case):
    harness.check(code, case)


def test_function_messages_name_the_hazard_the_region_and_an_opt_in_flag():
    assert "`x * x` product" in messages(_step(FN, REGIONS[0]), "TNL301")[0]
    code = FN + '\n\ndef step(x, args):\n    with torch.autocast("cuda", enabled=args.fp16):\n        return Energy.apply(x)\n'
    (message,) = messages(code, "TNL301")
    assert "(example.py:15, enabled only by its `enabled=` flag)" in message
    assert lint(code.replace("args.fp16", "True"), "TNL301") == [("TNL301", 7)]
    assert "enabled only" not in messages(code.replace("args.fp16", "True"), "TNL301")[0]
    kernel = textwrap.dedent(FUNCTION_FLAGGED[len(REGIONS) + 2].source)
    assert "compiled extension kernel `_C.roi_pool_forward`" in messages(kernel, "TNL301")[0]


# ---------------------------------------------------------------------------------------------
# TNL301: a Module reached from an fp16 region through the call graph

REACHING = [
    # a submodule attribute called in a decorated forward
    "class Model(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.head = Head()\n"
    "\n"
    '    @torch.autocast("cuda")\n'
    "    def forward(self, x):\n"
    "        return self.head(x)\n",
    # a local instance, an inline one, one moved to a device and called by .forward
    'def run(x):\n    m = Head()\n    with torch.autocast("cuda"):\n        return m(x)\n',
    'def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n',
    'def run(x):\n    m = Head().to("cuda")\n    with torch.autocast("cuda"):\n        return m.forward(x)\n',
    # two levels down: region -> Model.forward -> self.blocks (a ModuleList) -> Head.forward
    "class Model(nn.Module):\n"
    "    def __init__(self, depth):\n"
    "        super().__init__()\n"
    "        self.blocks = nn.ModuleList([Head() for _ in range(depth)])\n"
    "\n"
    "    def forward(self, x):\n"
    "        for block in self.blocks:\n"
    "            x = block(x)\n"
    "        return x\n"
    "\n"
    "\n"
    "def run(x):\n"
    "    model = Model(4).cuda()\n"
    '    with torch.autocast("cuda"):\n'
    "        return model(x)\n",
    # a builder's product, and a helper function called in the region
    "def build():\n    return nn.Sequential(nn.Linear(4, 4), Head())\n\n\ndef run(x):\n"
    '    model = build()\n    with torch.autocast("cuda"):\n        return model(x)\n',
    'def encode(x):\n    return Head()(x)\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return encode(x)\n',
    # a pipeline loaded with from_pretrained whose __call__ runs its submodule
    "class Pipeline:\n"
    "    def __init__(self, head: Head):\n"
    "        self.head = head\n"
    "\n"
    "    def __call__(self, x):\n"
    "        return self.head(x)\n"
    "\n"
    "\n"
    "def run(x):\n"
    '    pipe = Pipeline.from_pretrained("some/checkpoint")\n'
    '    with torch.autocast("cuda"):\n'
    "        return pipe(x)\n",
    # a subclass runs the forward it inherits
    'class Head2(Head):\n    pass\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head2()(x)\n',
]

MODULE_HAZARDS = [
    ("return h * h", "`x * x` product"),
    ("return h[..., 0] * h[..., 0]", "`x * x` product"),
    ("return h.masked_fill(h < 0, -1e9)", "`masked_fill` with -1e+09"),
    ("return h.masked_fill(h < 0, float('-1e9'))", "`masked_fill` with -1e+09"),
    ("return h / (h.abs().amax(-1, keepdim=True) + 1e-8)", "eps 1e-08 rounds to 0 in float16 (below 2.98e-8)"),
    ("return h / (h.abs().amax(-1, keepdim=True) + 1e-6)", "eps 1e-06 is a float16 subnormal whose reciprocal is Inf"),
    ("return torch.sqrt(h.var(-1) + 1e-10)", "eps 1e-10 rounds to 0"),
]


def _head(forward):
    return (
        "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n\nclass Head(nn.Module):\n"
        f"    def forward(self, h):\n        {forward}\n\n\n"
        'def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    )


MODULE_FLAGGED = [
    *[Flagged(HEAD + "\n\n" + body, (7,)) for body in REACHING],
    *[Flagged(_head(forward), (8,)) for forward, _ in MODULE_HAZARDS],
    # an eps from __init__ guarding a division
    Flagged(
        """\
        import torch
        from torch import nn


        class Norm(nn.Module):
            def __init__(self, eps=1e-8):
                super().__init__()
                self.eps = eps

            def forward(self, x):
                peak = x.abs().amax(-1, keepdim=True)
                return x / (peak + self.eps)


        def train(x):
            with torch.autocast("cuda"):
                return Norm()(x)
        """,
        (12,),
    ),
]

MODULE_SILENT = [
    *[
        Silent(_head(forward))
        for forward in [
            "return torch.relu(h) + 1",
            "return h.float().var(-1)",
            "return (h ** 2).mean(-1)",  # pow runs in fp32 under autocast, so does what follows
            # under CUDA autocast these run in float32, are bounded, or accumulate in float32
            "return h.mean(-1) * torch.sigmoid(h) * torch.tanh(h) * torch.sqrt(h.abs())",
            "return h.std(-1)",
            # a division is no hazard of its own, nor is an eps added to a float32 value
            "return h / h.std(-1, keepdim=True)",
            "return h / (h.norm(dim=-1, keepdim=True) + 1e-8)",
            "return h / 2.0",
            "return h / h.shape[-1]",
            # a subnormal eps still keeps a root or a log finite; a large one is no subnormal
            "return torch.sqrt(h.abs().amax(-1) + 1e-6)",
            "return h / (h.abs() + 1e-4)",
            # Python-number arithmetic is not float16
            "d = h.shape[-1]\n        return h / (d * d)",
            "return h * (h.size(-1) * h.size(-1))",
            # fill values float16 holds: -1e4, and -inf itself (TNL401's concern, not an overflow)
            "return h.masked_fill(h < 0, -1e4)",
            "return h.masked_fill(h < 0, float('-inf'))",
            "return h.masked_fill(h < 0, -float('inf'))",
            # an explicit cast to float16 adds nothing to a region that is float16 already
            "return F.scaled_dot_product_attention(h.half(), h.half(), h.half()).to(h.dtype)",
            "return torch.softmax(h, -1) * torch.exp(h)",
            'with torch.autocast("cuda", enabled=False):\n            return h.float().var(-1)',
        ]
    ],
    *[
        Silent(HEAD + "\n\n" + train)
        for train in [
            # the model is handed in: what it is, the linter cannot see
            'def train(model, x):\n    with torch.autocast("cuda"):\n        return model(x)\n\n\nmodel = Head()\n',
            # constructed and called, but outside the region
            'def train(x):\n    head = Head()\n    y = head(x)\n    with torch.autocast("cuda"):\n        return y @ y\n',
            # the region runs another module only
            "class Other(nn.Module):\n    def forward(self, h):\n        return h + 1\n\n\n"
            'def train(x):\n    with torch.autocast("cuda"):\n        return Other()(x)\n\n\nhead = Head()\n',
            # bf16 and CPU regions
            'def train(x):\n    with torch.autocast("cuda", dtype=torch.bfloat16):\n        return Head()(x)\n',
            'def train(x):\n    with torch.autocast("cpu"):\n        return Head()(x)\n',
            # under a disabled autocast inside the region
            'def train(x):\n    with torch.autocast("cuda"):\n        with torch.autocast("cuda", enabled=False):\n'
            "            return Head()(x.float())\n",
        ]
    ],
    # the forward casts its inputs to float32
    Silent(
        HEAD.replace("    def forward", '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward')
        + '\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    ),
]


# A Module of another file reached through the index, reported at its forward (no fix for a
# module); a class name that two files define is not resolved.
TRAIN_HEAD = 'import torch\nfrom {module} import Head\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
MODULE_PROJECTS = [
    harness.Project(
        {"models/heads.py": HEAD, "train.py": TRAIN_HEAD.format(module="models.heads")},
        {"models/heads.py": (7,)},
        message="(train.py:6)",
    ),
    harness.Project(
        {
            "a/heads.py": HEAD,
            "b/heads.py": HEAD.replace("h.var(-1)", "h + 1"),
            "train.py": TRAIN_HEAD.format(module="somewhere"),
        }
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL301", MODULE_FLAGGED, MODULE_SILENT, MODULE_PROJECTS))
def test_tnl301_modules(code, case):
    harness.check(code, case)


def test_module_messages_name_the_hazard_and_the_region():
    for body in REACHING:
        message = messages(HEAD + "\n\n" + body, "TNL301")[0]
        assert "`var` (the variance of values beyond 255 overflows float16) in `Head.forward`" in message
    for forward, op in MODULE_HAZARDS:
        (message,) = messages(_head(forward), "TNL301")
        assert op in message and "under fp16 autocast (example.py:12)" in message


# ---------------------------------------------------------------------------------------------
# TNL302

TRAIN = """\
import torch


def fit(model, x, y, loss_fn, optimizer):
    with {autocast}:
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
"""
FIT = "import torch\n\n\ndef fit(self, model, x, y, loss_fn, accelerator, engine, amp, opt, loss_scaler, scaler):\n"


def _fit(body):
    return FIT + body


SCALER_FLAGGED = [
    *[
        Flagged(TRAIN.format(autocast=autocast), (5,))
        for autocast in ['torch.autocast("cuda")', "torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda", dtype=torch.float16)']
    ],
    # a value derived from the region's output, outside it
    Flagged(_fit('    with torch.autocast("cuda"):\n        out = model(x)\n    loss = loss_fn(out, y) / 4\n    loss.backward()\n'), (5,)),
    # differentiated inside the region
    Flagged(_fit('    with torch.autocast("cuda"):\n        model(x).sum().backward()\n'), (5,)),
    # through torch.autograd.backward, and an autocast held in a name
    Flagged(
        _fit('    fp16 = torch.autocast("cuda")\n    with fp16:\n        loss = model(x).sum()\n    torch.autograd.backward(loss)\n'), (6,)
    ),
    # the decorator form: a function of the file differentiates what the decorated one returns
    Flagged(
        'import torch\n\n\n@torch.autocast("cuda")\ndef loss_of(model, x):\n    return model(x).sum()\n\n\n'
        "def fit(model, x):\n    loss_of(model, x).backward()\n",
        (4,),
    ),
    # a GradScaler built disabled scales nothing
    Flagged(TRAIN.format(autocast='torch.autocast("cuda")') + '\nscaler = torch.amp.GradScaler("cuda", enabled=False)\n', (5,)),
    Flagged(
        TRAIN.format(autocast='torch.autocast("cuda")') + "\nscaler = torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, False)\n", (5,)
    ),
]

SCALER_SILENT = [
    *[
        Silent(TRAIN.format(autocast=autocast))
        for autocast in [
            'torch.autocast("cuda", dtype=torch.bfloat16)',
            'torch.autocast("cpu")',
            'torch.autocast("cuda", enabled=False)',
            'torch.no_grad(), torch.autocast("cuda")',
        ]
    ],
    Silent(
        'import torch\n\n\n@torch.autocast("cuda")\ndef loss_of(model, x):\n    return model(x).sum()\n\n\n'
        "def fit(model, x):\n    return loss_of(model, x)\n"
    ),
    *[
        Silent(_fit(body))
        for body in [
            # no backward, or a backward of something the region did not compute
            '    with torch.autocast("cuda"):\n        return model(x)\n',
            '    with torch.autocast("cuda"):\n        preview = model(x)\n    penalty = model.weight.abs().sum()\n'
            "    penalty.backward()\n    return preview\n",
            # the loss leaves the function: its caller decides how to differentiate it
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    return loss\n',
            # frameworks that scale the loss themselves
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    accelerator.backward(loss)\n',
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    engine.backward(loss)\n    engine.step()\n',
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    self.manual_backward(loss)\n',
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    with amp.scale_loss(loss, opt) as scaled:\n'
            "        scaled.backward()\n",
            # a scaler object called with the loss, one passed in, or only on one branch
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    loss_scaler(loss, opt, parameters=model.parameters())\n',
            '    with torch.autocast("cuda"):\n        loss = loss_fn(model(x), y)\n    if scaler is not None:\n'
            "        scaler.scale(loss).backward()\n    else:\n        loss.backward()\n",
        ]
    ],
    # evaluation and sampling functions, and no_grad ones
    *[
        Silent(TRAIN.format(autocast='torch.autocast("cuda")').replace("def fit(", f"def {name}("))
        for name in ["evaluate", "validation_step", "generate", "sample_images", "__call__"]
    ],
    Silent(TRAIN.format(autocast='torch.autocast("cuda")').replace("def fit(", "@torch.no_grad()\ndef fit(")),
    Silent(TRAIN.format(autocast='torch.autocast("cuda")').replace("loss.backward()", "pass")),
    # a scaler constructed in the file, in any spelling
    *[
        Silent("from torch.cuda.amp import GradScaler\n" + TRAIN.format(autocast='torch.autocast("cuda")') + f"\nscaler = {scaler}\n")
        for scaler in [
            'torch.amp.GradScaler("cuda")',
            "torch.cuda.amp.GradScaler()",
            "GradScaler()",
            "torch.GradScaler('cuda', enabled=True)",
            "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler()",
        ]
    ],
    # a scaler passed in and used
    Silent("""
        import torch
        def train_step(model, x, opt, scaler):
            with torch.autocast("cuda"):
                loss = model(x).sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    """),
]


# The scaler may be constructed in another file of the project, or be a project subclass of
# GradScaler, or apex's amp may scale the loss; with none of them the backward is reported.
SCALER_PROJECTS = [
    harness.Project({"train.py": TRAIN.format(autocast='torch.autocast("cuda")')}, {"train.py": (5,)}),
    *[
        harness.Project({"train.py": TRAIN.format(autocast='torch.autocast("cuda")'), name: other})
        for name, other in [
            ("setup.py", 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n'),
            ("amp.py", "from torch.amp import GradScaler\n\n\nclass DynamicScaler(GradScaler):\n    pass\n"),
            ("setup.py", "from apex import amp\n\nmodel, opt = amp.initialize(model, opt)\n"),
        ]
    ],
]


@pytest.mark.parametrize("code, case", harness.params("TNL302", SCALER_FLAGGED, SCALER_SILENT, SCALER_PROJECTS))
def test_tnl302(code, case):
    harness.check(code, case)


def test_tnl302_message_names_the_backward_and_an_opt_in_flag():
    code = TRAIN.format(autocast='torch.autocast("cuda", enabled=use_amp)').replace("optimizer)", "optimizer, use_amp)")
    (message,) = messages(code, "TNL302")
    assert message.startswith("`loss.backward()` on a value computed under fp16 autocast (enabled only by its `enabled=` flag)")


# ---------------------------------------------------------------------------------------------
# TNL306


def _x(call):
    return f"import torch\n\nx = {call}\n"


DEPRECATED_FLAGGED = [
    *[
        Flagged(_x(before), (3,), fixed=_x(after))
        for before, after in [
            ("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")'),
            ("torch.cuda.amp.autocast(enabled=use_amp)", 'torch.amp.autocast("cuda", enabled=use_amp)'),
            ("torch.cuda.amp.autocast(True, torch.float16)", 'torch.amp.autocast("cuda", enabled=True, dtype=torch.float16)'),
            ("torch.cuda.amp.autocast(**kw)", 'torch.amp.autocast("cuda", **kw)'),
            ("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'),
            ("torch.cuda.amp.GradScaler(2.0**12, growth_interval=100)", 'torch.amp.GradScaler("cuda", 2.0**12, growth_interval=100)'),
            ("torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)", 'torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)'),
            ("torch.cuda.amp.custom_fwd(fn)", 'torch.amp.custom_fwd(fn, device_type="cuda")'),
            ("torch.cuda.amp.custom_bwd(fn)", 'torch.amp.custom_bwd(fn, device_type="cuda")'),
        ]
    ],
    # *args: reported, not rewritten
    Flagged(_x("torch.cuda.amp.autocast(*args)"), (3,)),
    # import forms; torch is imported where the file lacks it, the file's own `amp` alias reused
    Flagged(
        "from torch.cuda.amp import autocast as ac\n\nwith ac():\n    pass\n",
        (3,),
        fixed='import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n',
    ),
    Flagged(
        "import torch.cuda.amp as amp\nimport torch\n\ns = amp.GradScaler()\n",
        (4,),
        fixed='import torch.cuda.amp as amp\nimport torch\n\ns = torch.amp.GradScaler("cuda")\n',
    ),
    Flagged(
        "from torch import amp\nfrom torch.cuda.amp import GradScaler\n\ns = GradScaler()\n",
        (4,),
        fixed='from torch import amp\n\ns = amp.GradScaler("cuda")\n',
    ),
    # only the deprecated names nothing reads any more are removed
    Flagged(
        "from torch.cuda.amp import GradScaler, autocast\n\n\ndef f(s):\n    with autocast():\n        return isinstance(s, GradScaler)\n",
        (5,),
        fixed="from torch.cuda.amp import GradScaler\nimport torch\n\n\ndef f(s):\n"
        '    with torch.amp.autocast("cuda"):\n        return isinstance(s, GradScaler)\n',
    ),
    # the same call through a plain import is rewritten although the bare name is bound two ways
    Flagged(
        "import torch\ntry:\n    from torch.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\n\n"
        "x = torch.cuda.amp.autocast()\ny = autocast()\n",
        (7,),
        fixed="import torch\ntry:\n    from torch.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\n\n"
        'x = torch.amp.autocast("cuda")\ny = autocast()\n',
    ),
    # removing an import never empties a block
    Flagged(
        "import torch\nif HALF:\n    from torch.cuda.amp import GradScaler\n\ns = torch.cuda.amp.GradScaler()\n",
        (3, 5),
        fixed='import torch\nif HALF:\n    pass\n\ns = torch.amp.GradScaler("cuda")\n',
    ),
    Flagged(
        "import torch\nif HALF:\n    from torch.cuda.amp import GradScaler\n    flag = True\n",
        (3,),
        fixed="import torch\nif HALF:\n    flag = True\n",
    ),
]

VERSION_TESTS = [
    'import torch\n\ns = torch.amp.GradScaler("cuda") if TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()\n',
    "import torch\nif hasattr(torch, 'amp'):\n    ctx = torch.autocast('cuda')\nelse:\n    ctx = torch.cuda.amp.autocast()\n",
    "import torch\nif version.parse(torch.__version__) >= version.parse('2.4'):\n    ctx = torch.autocast('cuda')\n"
    "elif old:\n    ctx = torch.cuda.amp.autocast()\n",
    # the fallback of a try that uses the new spelling
    "import torch\ntry:\n    scaler = torch.amp.GradScaler(device='cuda')\nexcept AttributeError:\n"
    "    scaler = torch.cuda.amp.GradScaler()\n",
    # the old-torch branch first
    "import torch\nif version.parse(torch.__version__) < version.parse('2.4.0'):\n"
    "    scaler = torch.cuda.amp.GradScaler()\nelse:\n    scaler = torch.GradScaler('cuda')\n",
]

DEPRECATED_SILENT = [
    Silent('import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'),
    Silent("import apex.amp as amp\n\nx = amp.autocast()\n"),
    Silent("from torch.cuda import amp\n\nx = amp.autocast\n"),
    # a name bound differently on two branches: which one runs is not known here
    *[
        Silent(header + "\n\ndef step(x):\n    with autocast():\n        return x\n")
        for header in [
            "try:\n    from torch.cuda.amp import autocast\nexcept ImportError:\n    from torch.amp import autocast\n",
            "try:\n    from torch.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\n",
            "if NEW_TORCH:\n    from torch.amp import autocast\nelse:\n    from torch.cuda.amp import autocast\n",
            "try:\n    from torch.cuda.amp import autocast\nexcept ImportError:\n    autocast = None\n",
        ]
    ],
    # the fallback of a torch-version test is what only old torch runs
    *[Silent(code) for code in VERSION_TESTS],
    # an import other code may read: an availability probe, a re-export, a class attribute
    Silent(
        "import torch\ntry:\n    from torch.cuda.amp import autocast\n    HAS_AMP = True\nexcept ImportError:\n    HAS_AMP = False\n",
        path="probe.py",
    ),
    Silent("import torch\nfrom torch.cuda.amp import GradScaler\n__all__ = ['GradScaler']\n", path="compat.py"),
    Silent("import torch\nfrom torch.cuda.amp import GradScaler\n", path="__init__.py"),
    Silent("import torch\nclass Amp:\n    from torch.cuda.amp import autocast\n", path="amp.py"),
]


@pytest.mark.parametrize("code, case", harness.params("TNL306", DEPRECATED_FLAGGED, DEPRECATED_SILENT))
def test_tnl306(code, case):
    harness.check(code, case)


@pytest.mark.parametrize("code", VERSION_TESTS)
def test_tnl306_the_same_call_outside_a_version_test_is_reported(code):
    outside = code + "y = torch.cuda.amp.autocast()\n"  # run on every torch version
    assert lint(outside, "TNL306") == [("TNL306", outside.count("\n"))]


# ---------------------------------------------------------------------------------------------
# One AMP vocabulary (rules/autocast.py), read the same by the project index and the rules


def _both_shapes(source):
    """The shape of every call in `source`, as the index (ast) and the rules (LibCST) read it."""
    tree = ast.parse(source)
    imports = index_module._Imports(tree)
    by_ast = [index_module._call_shape(imports, n) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    module = cst.parse_module(source)
    ctx = FileContext("example.py", source, module, ProjectIndex.empty())
    calls = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node):
            calls.append(node)

    module.visit(_Calls())
    by_cst = [amp.call_shape(ctx, c) for c in calls]
    return sorted(by_ast, key=repr), sorted(by_cst, key=repr)


def _spelling(qual):
    """An import that makes `qual` readable, and the expression naming it."""
    module, name = qual.rsplit(".", 1)
    return f"import torch\nimport functools\nimport {module}\n", f"{module}.{name}"


def test_number_literals_and_names_are_read_the_same_by_index_and_rules():
    source = (
        "import torch\n"
        'x = f(float("inf"), -1e9, float("-1e9"), -float("inf"), +3, "cuda", True, torch.float16, h,\n'
        "      float(s), g(2), *rest, 7, k=1e-8, j=float('nan'), **extra)\n"
    )
    by_ast, by_cst = _both_shapes(source)
    assert repr(by_ast) == repr(by_cst)  # NaN is not equal to itself: compare what each read
    outer = next(s for s in by_ast if s.qual is None and len(s.pos) > 3)
    inf = float("inf")
    assert outer.pos == (inf, -1e9, -1e9, -inf, 3.0, "cuda", True, autocast.Dotted("torch.float16"), None, None, None)
    assert outer.kw["k"] == 1e-8 and outer.kw["j"] != outer.kw["j"]  # NaN


@pytest.mark.parametrize("qual", sorted(autocast.AUTOCAST_ALL))
def test_every_autocast_spelling_is_an_fp16_region_to_both(qual):
    head, name = _spelling(qual)
    args = '"cuda"' if qual in autocast.AUTOCAST_GENERIC else "dtype=torch.float16" if qual in autocast.AUTOCAST_CPU else ""
    source = head + f"\n\ndef step(model, x):\n    with {name}({args}):\n        return model(x)\n"
    by_ast, by_cst = _both_shapes(source)
    assert by_ast == by_cst
    assert len(build_index([("example.py", source)]).fp16_sites()) == 1
    module = cst.parse_module(source)
    ctx = FileContext("example.py", source, module, ProjectIndex.empty())
    with_node = module.body[-1].body.body[0]
    assert [found for _, found in amp.fp16_openers(ctx, with_node)] == [("cuda" if "cpu" not in qual else "cpu", False)]
    # and as a functools.partial, and disabled
    partial = source.replace(f"with {name}({args}):", f"amp = functools.partial({name}, {args or 'enabled=True'})\n    with amp():")
    assert len(build_index([("example.py", partial)]).fp16_sites()) == 1
    disabled = source.replace(f"{name}({args})", f"{name}({args}{', ' if args else ''}enabled=False)")
    assert build_index([("example.py", disabled)]).fp16_sites() == []


@pytest.mark.parametrize("qual", sorted(autocast.GRAD_SCALERS))
def test_every_grad_scaler_spelling_counts_unless_built_disabled(qual):
    head, name = _spelling(qual)
    train = TRAIN.format(autocast='torch.autocast("cuda")')
    assert build_index([("s.py", head + f"s = {name}()\n")]).has_scaler()
    assert not build_index([("s.py", head + f"s = {name}(enabled=False)\n")]).has_scaler()
    position = autocast.GRAD_SCALERS[qual]
    positional = ", ".join(["'cuda'", "2.0**16", "2.0", "0.5", "2000"][5 - position :] + ["False"])
    assert not build_index([("s.py", head + f"s = {name}({positional})\n")]).has_scaler()
    assert lint(train, "TNL302", path="t.py", index=build_index([("t.py", train), ("s.py", head + f"s = {name}()\n")])) == []


@pytest.mark.parametrize("qual", sorted(autocast.CUSTOM_FWD))
def test_every_custom_fwd_spelling_protects_a_function(qual):
    head, name = _spelling(qual)
    code = (
        head
        + FN.replace("import torch\n", "").replace(
            "    @staticmethod\n    def forward", f"    @staticmethod\n    @{name}(cast_inputs=torch.float32)\n    def forward"
        )
        + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
    )
    assert build_index([("example.py", code)]).lookup("Energy", None, "example.py").protected
    assert lint(code, "TNL301") == []


@pytest.mark.parametrize("qual", sorted(autocast.DEPRECATED))
def test_every_deprecated_spelling_is_reported_with_its_replacement(qual):
    head, name = _spelling(qual)
    found = lint_text("example.py", head + f"x = {name}()\n", [RULES["TNL306"]])
    assert [f.line for f in found] == [4]
    assert autocast.DEPRECATED[qual].rsplit(".", 1)[1] in found[0].message


def test_the_vocabulary_needs_no_libcst():
    """`rules/autocast.py` loads where libcst cannot be imported (the index's side of it)."""
    script = (
        "import importlib.util, sys\n"
        "sys.modules['libcst'] = None\n"
        f"spec = importlib.util.spec_from_file_location('vocabulary', {autocast.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(module.classify_autocast(module.CallShape('torch.autocast', ('cuda',), {})))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "('cuda', False)"
    assert importlib.util.find_spec("torchnumlint.rules.autocast") is not None
