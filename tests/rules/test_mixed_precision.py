"""TNL301 / TNL302 / TNL306: the mixed-precision family."""

import textwrap

import pytest

from torchnumlint.engine import lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.index import build_index
from torchnumlint.rules.base import registry

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


@pytest.mark.parametrize(
    "call",
    [
        '    with torch.autocast("cuda"):\n        return Energy.apply(x)\n',
        '    with torch.autocast(device_type="cuda", dtype=torch.float16):\n        return Energy.apply(x)\n',
        '    with torch.amp.autocast("cuda"):\n        return Energy.apply(x)\n',
        "    with torch.cuda.amp.autocast():\n        return Energy.apply(x)\n",
        '    with torch.autocast("cuda", torch.half):\n        return Energy.apply(x)\n',
        '    with torch.no_grad(), torch.autocast("cuda"):\n        return Energy.apply(x)\n',
        '    with torch.autocast("cuda"):\n        fn = Energy.apply\n        return fn(x)\n',
        '    with torch.autocast("cpu", dtype=torch.float16):\n        return Energy.apply(x)\n',
        # an autocast held in a name, and one built with functools.partial
        '    amp = torch.autocast("cuda")\n    with amp:\n        return Energy.apply(x)\n',
        '    ctx = functools.partial(torch.autocast, "cuda", dtype=torch.float16)\n    with ctx():\n        return Energy.apply(x)\n',
    ],
)
def test_function_reached_from_a_region(call):
    code = "import functools\n" + FN + "\n\ndef step(x):\n" + call
    assert lint(code, "TNL301") == [("TNL301", 8)]
    assert "`x * x` product" in messages(code, "TNL301")[0]


def test_function_in_a_decorated_function_and_through_a_module_level_alias():
    code = FN + '\n\nenergy = Energy.apply\n\n\n@torch.autocast("cuda")\ndef step(x):\n    return energy(x)\n'
    assert lint(code, "TNL301") == [("TNL301", 7)]


def test_function_message_cites_the_region_and_an_opt_in_flag():
    code = FN + "\n\ndef step(x, args):\n    with torch.autocast(\"cuda\", enabled=args.fp16):\n        return Energy.apply(x)\n"
    (message,) = messages(code, "TNL301")
    assert "(example.py:15, enabled only by its `enabled=` flag)" in message
    assert lint(code.replace("args.fp16", "True"), "TNL301") == [("TNL301", 7)]
    assert "enabled only" not in messages(code.replace("args.fp16", "True"), "TNL301")[0]


def test_function_calling_a_compiled_kernel():
    code = """\
    import torch
    from . import _C


    class RoIPool(torch.autograd.Function):
        @staticmethod
        def forward(ctx, feats, rois):
            return _C.roi_pool_forward(feats, rois)


    def pool(feats, rois):
        with torch.autocast("cuda"):
            return RoIPool.apply(feats, rois)
    """
    assert lint(code, "TNL301") == [("TNL301", 8)]
    assert "compiled extension kernel `_C.roi_pool_forward`" in messages(code, "TNL301")[0]
    out = fix_text("example.py", textwrap.dedent(code), [RULES["TNL301"]]).text
    assert '@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)' in out


def test_function_applied_in_a_reached_module_forward_gets_the_fix():
    code = FN + (
        "\n\nclass Layer(torch.nn.Module):\n    def forward(self, x):\n        return Energy.apply(x)\n"
        '\n\ndef run(x):\n    model = Layer()\n    with torch.autocast("cuda"):\n        return model(x)\n'
    )
    assert lint(code, "TNL301") == [("TNL301", 7)]
    out = fix_text("example.py", code, [RULES["TNL301"]]).text
    assert '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward' in out
    assert '    @staticmethod\n    @torch.amp.custom_bwd(device_type="cuda")\n    def backward' in out
    assert lint(out, "TNL301") == []


def test_fix_adds_cast_inputs_to_an_existing_custom_fwd_and_uses_the_region_device():
    code = FN.replace(
        "    @staticmethod\n    def forward", '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda")\n    def forward'
    ) + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
    out = fix_text("example.py", code, [RULES["TNL301"]]).text
    assert '@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)' in out
    assert "custom_bwd" not in out
    assert lint(out, "TNL301") == []
    cpu = FN + '\n\ndef step(x):\n    with torch.autocast("cpu", dtype=torch.float16):\n        return Energy.apply(x)\n'
    assert '@torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)' in fix_text(
        "example.py", cpu, [RULES["TNL301"]]).text


def test_cross_file_function_is_reported_at_its_forward_with_the_fix():
    train = 'import torch\nfrom ops import Energy\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
    index = build_index([("ops.py", FN), ("train.py", train)])
    assert lint(train, "TNL301", path="train.py", index=index) == []
    found = lint_text("ops.py", FN, [RULES["TNL301"]], index=index)
    assert [(f.code, f.line) for f in found] == [("TNL301", 7)]
    assert "(train.py:6)" in found[0].message and found[0].fix is not None


@pytest.mark.parametrize(
    "call",
    [
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n        return Energy.apply(x)\n',
        '    with torch.autocast("cpu"):\n        return Energy.apply(x)\n',
        '    with torch.autocast("cuda", enabled=False):\n        return Energy.apply(x)\n',
        "    with torch.cuda.amp.autocast(enabled=False):\n        return Energy.apply(x)\n",
        "    with torch.cuda.amp.autocast(dtype=torch.bfloat16):\n        return Energy.apply(x)\n",
        '    with torch.autocast(device, dtype=amp_dtype):\n        return Energy.apply(x)\n',
        '    with torch.autocast(device):\n        return Energy.apply(x)\n',
        "    return Energy.apply(x)\n",
        '    with torch.autocast("cuda"):\n        with torch.autocast("cuda", enabled=False):\n            return Energy.apply(x.float())\n',
        '    with torch.autocast("cuda"):\n        y = x @ x\n    return Energy.apply(y.float())\n',
    ],
)
def test_function_look_alikes(call):
    code = FN + "\n\ndef step(x, device, amp_dtype):\n" + call
    assert lint(code, "TNL301") == []


@pytest.mark.parametrize(
    "forward",
    [
        # exp and sum run in float32 under CUDA autocast, and so does the division of their results
        "e = s.exp()\n        return e / e.sum(-1, keepdim=True)",
        "return torch.sigmoid(s) * torch.tanh(s)",
        "return s.mean(-1) + torch.sqrt(s.abs())",
        "n = s.shape[-1]\n        return s / (n * n)",
    ],
)
def test_function_without_an_fp16_hazard_under_the_cuda_policy(forward):
    code = FN.replace("return s * s", forward) + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
    assert lint(code, "TNL301") == []


def test_protected_function_not_flagged():
    code = FN.replace(
        "    @staticmethod\n    def forward",
        '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward',
    ) + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return Energy.apply(x)\n'
    assert lint(code, "TNL301") == []
    legacy = code.replace('torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)',
                          "torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)")
    assert lint(legacy, "TNL301") == []


# ---------------------------------------------------------------------------------------------
# TNL301: a Module reached from an fp16 region through the call graph


@pytest.mark.parametrize(
    "body",
    [
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
        'def build():\n    return nn.Sequential(nn.Linear(4, 4), Head())\n\n\ndef run(x):\n'
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
    ],
)
def test_module_reached_from_a_region(body):
    code = HEAD + "\n\n" + body
    assert lint(code, "TNL301") == [("TNL301", 7)]
    assert "`var` (the variance of values beyond 255 overflows float16) in `Head.forward`" in messages(code, "TNL301")[0]


@pytest.mark.parametrize(
    "forward, op",
    [
        ("return h * h", "`x * x` product"),
        ("return h[..., 0] * h[..., 0]", "`x * x` product"),
        ("return h.masked_fill(h < 0, -1e9)", "`masked_fill` with -1e+09"),
        ("return h / (h.abs().amax(-1, keepdim=True) + 1e-8)", "eps 1e-08 rounds to 0 in float16 (below 2.98e-8)"),
        ("return h / (h.abs().amax(-1, keepdim=True) + 1e-6)", "eps 1e-06 is a float16 subnormal whose reciprocal is Inf"),
        ("return torch.sqrt(h.var(-1) + 1e-10)", "eps 1e-10 rounds to 0"),
    ],
)
def test_each_module_hazard(forward, op):
    code = (
        "import torch\nfrom torch import nn\n\n\nclass Head(nn.Module):\n"
        f"    def forward(self, h):\n        {forward}\n\n\n"
        'def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    )
    assert lint(code, "TNL301") == [("TNL301", 7)]
    assert op in messages(code, "TNL301")[0]
    assert "under fp16 autocast (example.py:11)" in messages(code, "TNL301")[0]


def test_eps_from_init_guarding_a_division():
    code = """\
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
    """
    assert lint(code, "TNL301") == [("TNL301", 12)]


@pytest.mark.parametrize(
    "forward",
    [
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
        "return h.masked_fill(h < 0, -1e4)",
        "return h.masked_fill(h < 0, float('-inf'))",
        # an explicit cast to float16 adds nothing to a region that is float16 already
        "return F.scaled_dot_product_attention(h.half(), h.half(), h.half()).to(h.dtype)",
        "return torch.softmax(h, -1) * torch.exp(h)",
        'with torch.autocast("cuda", enabled=False):\n            return h.float().var(-1)',
    ],
)
def test_module_look_alikes(forward):
    code = (
        "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n\nclass Head(nn.Module):\n"
        f"    def forward(self, h):\n        {forward}\n\n\n"
        'def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    )
    assert lint(code, "TNL301") == []


@pytest.mark.parametrize(
    "train",
    [
        # the model is handed in: what it is, the linter cannot see
        'def train(model, x):\n    with torch.autocast("cuda"):\n        return model(x)\n\n\nmodel = Head()\n',
        # constructed and called, but outside the region
        'def train(x):\n    head = Head()\n    y = head(x)\n    with torch.autocast("cuda"):\n        return y @ y\n',
        # the region runs another module only
        'class Other(nn.Module):\n    def forward(self, h):\n        return h + 1\n\n\n'
        'def train(x):\n    with torch.autocast("cuda"):\n        return Other()(x)\n\n\nhead = Head()\n',
        # bf16 and CPU regions
        'def train(x):\n    with torch.autocast("cuda", dtype=torch.bfloat16):\n        return Head()(x)\n',
        'def train(x):\n    with torch.autocast("cpu"):\n        return Head()(x)\n',
        # under a disabled autocast inside the region
        'def train(x):\n    with torch.autocast("cuda"):\n        with torch.autocast("cuda", enabled=False):\n'
        "            return Head()(x.float())\n",
    ],
)
def test_module_not_reached_is_not_flagged(train):
    assert lint(HEAD + "\n\n" + train, "TNL301") == []


def test_cross_file_module_reached_through_the_index():
    train = 'import torch\nfrom models.heads import Head\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    index = build_index([("models/heads.py", HEAD), ("train.py", train)])
    assert lint(HEAD, "TNL301", path="models/heads.py", index=index) == [("TNL301", 7)]
    assert "(train.py:6)" in messages(HEAD, "TNL301", path="models/heads.py", index=index)[0]
    assert lint(train, "TNL301", path="train.py", index=index) == []


def test_module_protected_by_custom_fwd_is_not_flagged():
    code = HEAD.replace(
        "    def forward", '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward'
    ) + '\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    assert lint(code, "TNL301") == []


def test_ambiguous_class_name_is_not_resolved():
    other = HEAD.replace("h.var(-1)", "h + 1")
    train = 'import torch\nfrom somewhere import Head\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    index = build_index([("a/heads.py", HEAD), ("b/heads.py", other), ("train.py", train)])
    assert lint(HEAD, "TNL301", path="a/heads.py", index=index) == []


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


@pytest.mark.parametrize(
    "autocast",
    ['torch.autocast("cuda")', "torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda", dtype=torch.float16)'],
)
def test_tnl302_flags_fp16_training_without_scaler(autocast):
    assert lint(TRAIN.format(autocast=autocast), "TNL302") == [("TNL302", 5)]


@pytest.mark.parametrize(
    "body",
    [
        # a value derived from the region's output, outside it
        '    with torch.autocast("cuda"):\n        out = model(x)\n    loss = loss_fn(out, y) / 4\n    loss.backward()\n',
        # differentiated inside the region
        '    with torch.autocast("cuda"):\n        model(x).sum().backward()\n',
        # through torch.autograd.backward, and an autocast held in a name
        '    amp = torch.autocast("cuda")\n    with amp:\n        loss = model(x).sum()\n    torch.autograd.backward(loss)\n',
    ],
)
def test_tnl302_backward_of_a_value_from_the_region(body):
    code = "import torch\n\n\ndef fit(model, x, y, loss_fn):\n" + body
    assert [c for c, _ in lint(code, "TNL302")] == ["TNL302"]


def test_tnl302_decorator_form():
    code = 'import torch\n\n\n@torch.autocast("cuda")\ndef loss_of(model, x):\n    return model(x).sum()\n\n\ndef fit(model, x):\n    loss_of(model, x).backward()\n'
    assert lint(code, "TNL302") == [("TNL302", 4)]
    assert lint(code.replace("loss_of(model, x).backward()", "return loss_of(model, x)"), "TNL302") == []


def test_tnl302_message_names_the_backward_and_an_opt_in_flag():
    code = TRAIN.format(autocast='torch.autocast("cuda", enabled=use_amp)').replace("optimizer)", "optimizer, use_amp)")
    (message,) = messages(code, "TNL302")
    assert message.startswith("`loss.backward()` on a value computed under fp16 autocast (enabled only by its `enabled=` flag)")


@pytest.mark.parametrize(
    "autocast",
    ['torch.autocast("cuda", dtype=torch.bfloat16)', 'torch.autocast("cpu")', 'torch.autocast("cuda", enabled=False)',
     'torch.no_grad(), torch.autocast("cuda")'],
)
def test_tnl302_look_alikes(autocast):
    assert lint(TRAIN.format(autocast=autocast), "TNL302") == []


@pytest.mark.parametrize(
    "body",
    [
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
    ],
)
def test_tnl302_not_an_unscaled_backward_of_the_region(body):
    code = "import torch\n\n\ndef fit(self, model, x, y, loss_fn, accelerator, engine, amp, opt, loss_scaler, scaler):\n" + body
    assert lint(code, "TNL302") == []


@pytest.mark.parametrize("name", ["evaluate", "validation_step", "generate", "sample_images", "__call__"])
def test_tnl302_inference_functions(name):
    code = TRAIN.format(autocast='torch.autocast("cuda")').replace("def fit(", f"def {name}(")
    assert lint(code, "TNL302") == []
    decorated = TRAIN.format(autocast='torch.autocast("cuda")').replace("def fit(", "@torch.no_grad()\ndef fit(")
    assert lint(decorated, "TNL302") == []


def test_tnl302_no_backward_is_not_flagged():
    assert lint(TRAIN.format(autocast='torch.autocast("cuda")').replace("loss.backward()", "pass"), "TNL302") == []


@pytest.mark.parametrize(
    "scaler",
    ['torch.amp.GradScaler("cuda")', "torch.cuda.amp.GradScaler()", "GradScaler()",
     "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler()"],
)
def test_tnl302_scaler_in_the_same_file(scaler):
    code = "from torch.cuda.amp import GradScaler\n" + TRAIN.format(autocast='torch.autocast("cuda")') + f"\nscaler = {scaler}\n"
    assert lint(code, "TNL302") == []


def test_tnl302_scaler_in_another_file_or_a_scaler_subclass():
    train = TRAIN.format(autocast='torch.autocast("cuda")')
    setup = 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n'
    assert lint(train, "TNL302", path="train.py", index=build_index([("train.py", train), ("setup.py", setup)])) == []
    assert lint(train, "TNL302", path="train.py", index=build_index([("train.py", train)])) == [("TNL302", 5)]
    subclass = "from torch.amp import GradScaler\n\n\nclass DynamicScaler(GradScaler):\n    pass\n"
    assert lint(train, "TNL302", path="train.py", index=build_index([("train.py", train), ("amp.py", subclass)])) == []
    apex = "from apex import amp\n\nmodel, opt = amp.initialize(model, opt)\n"
    assert lint(train, "TNL302", path="train.py", index=build_index([("train.py", train), ("setup.py", apex)])) == []


def test_tnl302_disabled_scaler_does_not_count():
    code = TRAIN.format(autocast='torch.autocast("cuda")') + '\nscaler = torch.amp.GradScaler("cuda", enabled=False)\n'
    assert lint(code, "TNL302") == [("TNL302", 5)]


def test_tnl302_a_scaler_passed_in_and_used_counts():
    code = """
        import torch
        def train_step(model, x, opt, scaler):
            with torch.autocast("cuda"):
                loss = model(x).sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    """
    assert lint(code, "TNL302") == []


# ---------------------------------------------------------------------------------------------
# TNL306


def fixed306(code):
    return fix_text("example.py", textwrap.dedent(code), [RULES["TNL306"]]).text


@pytest.mark.parametrize(
    "before, after",
    [
        ("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")'),
        ("torch.cuda.amp.autocast(enabled=use_amp)", 'torch.amp.autocast("cuda", enabled=use_amp)'),
        ("torch.cuda.amp.autocast(True, torch.float16)", 'torch.amp.autocast("cuda", enabled=True, dtype=torch.float16)'),
        ("torch.cuda.amp.autocast(**kw)", 'torch.amp.autocast("cuda", **kw)'),
        ("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'),
        ("torch.cuda.amp.GradScaler(2.0**12, growth_interval=100)", 'torch.amp.GradScaler("cuda", 2.0**12, growth_interval=100)'),
        ("torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)", 'torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)'),
        ("torch.cuda.amp.custom_fwd(fn)", 'torch.amp.custom_fwd(fn, device_type="cuda")'),
    ],
)
def test_tnl306_rewrites(before, after):
    code = f"import torch\n\nx = {before}\n"
    assert lint(code, "TNL306") == [("TNL306", 3)]
    assert fixed306(code) == f"import torch\n\nx = {after}\n"


def test_tnl306_star_args_is_reported_without_fix():
    code = "import torch\n\nx = torch.cuda.amp.autocast(*args)\n"
    assert lint(code, "TNL306") == [("TNL306", 3)]
    assert fixed306(code) == code


def test_tnl306_import_forms_add_torch_when_missing():
    code = "from torch.cuda.amp import autocast as ac\n\nwith ac():\n    pass\n"
    assert fixed306(code) == 'import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'
    code = "import torch.cuda.amp as amp\nimport torch\n\ns = amp.GradScaler()\n"
    assert fixed306(code) == 'import torch.cuda.amp as amp\nimport torch\n\ns = torch.amp.GradScaler("cuda")\n'


def test_tnl306_reuses_the_files_amp_alias():
    code = "from torch import amp\nfrom torch.cuda.amp import GradScaler\n\ns = GradScaler()\n"
    assert fixed306(code) == 'from torch import amp\n\ns = amp.GradScaler("cuda")\n'


def test_tnl306_look_alikes():
    assert lint('import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n', "TNL306") == []
    assert lint("import apex.amp as amp\n\nx = amp.autocast()\n", "TNL306") == []
    assert lint("from torch.cuda import amp\n\nx = amp.autocast\n", "TNL306") == []


def test_tnl306_removes_only_the_deprecated_names_nothing_uses():
    code = "from torch.cuda.amp import GradScaler, autocast\n\n\ndef f(s):\n    with autocast():\n        return isinstance(s, GradScaler)\n"
    assert fixed306(code) == (
        "from torch.cuda.amp import GradScaler\nimport torch\n\n\ndef f(s):\n"
        '    with torch.amp.autocast("cuda"):\n        return isinstance(s, GradScaler)\n'
    )


@pytest.mark.parametrize(
    "header",
    [
        "try:\n    from torch.cuda.amp import autocast\nexcept ImportError:\n    from torch.amp import autocast\n",
        "try:\n    from torch.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\n",
        "if NEW_TORCH:\n    from torch.amp import autocast\nelse:\n    from torch.cuda.amp import autocast\n",
        "try:\n    from torch.cuda.amp import autocast\nexcept ImportError:\n    autocast = None\n",
    ],
)
def test_tnl306_a_name_bound_differently_on_two_branches_is_not_rewritten(header):
    code = header + "\n\ndef step(x):\n    with autocast():\n        return x\n"
    assert lint(code, "TNL306") == []
    assert fixed306(code) == code


def test_tnl306_the_same_call_through_a_plain_import_is_still_rewritten():
    code = "import torch\ntry:\n    from torch.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\n\nx = torch.cuda.amp.autocast()\ny = autocast()\n"
    assert lint(code, "TNL306") == [("TNL306", 7)]


def test_tnl306_removing_an_import_never_empties_a_block():
    code = "import torch\nif HALF:\n    from torch.cuda.amp import GradScaler\n\ns = torch.cuda.amp.GradScaler()\n"
    assert fixed306(code) == 'import torch\nif HALF:\n    pass\n\ns = torch.amp.GradScaler("cuda")\n'
    code = "import torch\nif HALF:\n    from torch.cuda.amp import GradScaler\n    flag = True\n"
    assert fixed306(code) == "import torch\nif HALF:\n    flag = True\n"


@pytest.mark.parametrize(
    "code",
    [
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
    ],
)
def test_tnl306_the_fallback_of_a_torch_version_test_is_left_alone(code):
    assert lint(code, "TNL306") == []
    outside = code + "y = torch.cuda.amp.autocast()\n"  # the same call, run on every torch version
    assert lint(outside, "TNL306") == [("TNL306", outside.count("\n"))]


@pytest.mark.parametrize(
    "code, path",
    [
        # an availability probe: the try tests that the import works
        ("import torch\ntry:\n    from torch.cuda.amp import autocast\n    HAS_AMP = True\nexcept ImportError:\n    HAS_AMP = False\n",
         "probe.py"),
        # a re-export
        ("import torch\nfrom torch.cuda.amp import GradScaler\n__all__ = ['GradScaler']\n", "compat.py"),
        ("import torch\nfrom torch.cuda.amp import GradScaler\n", "__init__.py"),
        # a class attribute
        ("import torch\nclass Amp:\n    from torch.cuda.amp import autocast\n", "amp.py"),
    ],
)
def test_tnl306_keeps_an_import_other_code_may_read(code, path):
    assert lint(code, "TNL306", path=path) == []
