"""TNL301 / TNL302 / TNL306: the mixed-precision family."""

import textwrap

import pytest

from torchnumlint.engine import fix_text, lint_text
from torchnumlint.index import build_index
from torchnumlint.rules.base import registry

RULES = registry()

FN = """\
import torch


class ExpNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s):
        e = s.exp()
        return e / e.sum(-1, keepdim=True)

    @staticmethod
    def backward(ctx, g):
        return g
"""

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
# TNL301: flagged


@pytest.mark.parametrize(
    "call, line",
    [
        ('    with torch.autocast("cuda"):\n        return ExpNorm.apply(x)\n', 17),
        ('    with torch.autocast(device_type="cuda", dtype=torch.float16):\n        return ExpNorm.apply(x)\n', 17),
        ('    with torch.amp.autocast("cuda"):\n        return ExpNorm.apply(x)\n', 17),
        ("    with torch.cuda.amp.autocast():\n        return ExpNorm.apply(x)\n", 17),
        ('    with torch.autocast("cuda", torch.half):\n        return ExpNorm.apply(x)\n', 17),
        ('    with torch.no_grad(), torch.autocast("cuda"):\n        return ExpNorm.apply(x)\n', 17),
        ('    with torch.autocast("cuda"):\n        fn = ExpNorm.apply\n        return fn(x)\n', 18),
        ('    with torch.autocast("cpu", dtype=torch.float16):\n        return ExpNorm.apply(x)\n', 17),
    ],
)
def test_function_apply_in_with_region(call, line):
    code = FN + "\n\ndef step(x):\n" + call
    assert lint(code, "TNL301") == [("TNL301", line)]


def test_function_apply_in_decorated_function():
    code = FN + '\n\n@torch.autocast("cuda")\ndef step(x):\n    return ExpNorm.apply(x)\n'
    assert lint(code, "TNL301") == [("TNL301", 17)]


def test_function_apply_with_imported_autocast():
    code = FN.replace("import torch\n", "import torch\nfrom torch.cuda.amp import autocast\n") + (
        "\n\ndef step(x):\n    with autocast():\n        return ExpNorm.apply(x)\n"
    )
    assert lint(code, "TNL301") == [("TNL301", 18)]


def test_function_subclass_through_from_import():
    code = """\
    import torch
    from torch.autograd import Function


    class Fn(Function):
        @staticmethod
        def forward(ctx, s):
            return s.exp()


    def step(x):
        with torch.autocast("cuda"):
            return Fn.apply(x)
    """
    assert lint(code, "TNL301") == [("TNL301", 13)]


@pytest.mark.parametrize(
    "body, line",
    [
        # a self attribute
        (
            "class Model(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.head = Head()\n"
            "\n"
            '    @torch.autocast("cuda")\n'
            "    def forward(self, x):\n"
            "        return self.head(x)\n",
            17,
        ),
        # a local instance
        ('def run(x):\n    m = Head()\n    with torch.autocast("cuda"):\n        return m(x)\n', 13),
        # an inline instance
        ('def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n', 12),
        # through .to(device) and .forward
        ('def run(x):\n    m = Head().to("cuda")\n    with torch.autocast("cuda"):\n        return m.forward(x)\n', 13),
    ],
)
def test_module_instance_in_region(body, line):
    code = HEAD + "\n\n" + body
    assert lint(code, "TNL301") == [("TNL301", line)]
    assert "`var` at example.py:7" in messages(code, "TNL301")[0]


def test_module_subclass_of_project_module_inherits_forward():
    code = HEAD + '\n\nclass Head2(Head):\n    pass\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head2()(x)\n'
    assert lint(code, "TNL301") == [("TNL301", 16)]


@pytest.mark.parametrize(
    "forward, op",
    [
        ("return h * h", "`x * x`"),
        ("return h.std(-1)", "`std`"),
        ("return h / h.std(-1, keepdim=True)", "`/` division"),
        ("return h / h.amax(-1, keepdim=True)", "`/` division"),
        ("return torch.sqrt(h)", "`sqrt`"),
        ("return h.mean(-1)", "`mean`"),
        ("return torch.sigmoid(h)", "`sigmoid`"),
        ("return h.masked_fill(h < 0, -1e9)", "`masked_fill`"),
        ("return h + torch.zeros(3, dtype=torch.float16)", "explicit `dtype=torch.float16`"),
        ("return h + 1e-8", "eps 1e-08"),
    ],
)
def test_each_hazard_kind(forward, op):
    code = (
        "import torch\nfrom torch import nn\n\n\nclass Head(nn.Module):\n"
        f"    def forward(self, h):\n        {forward}\n\n\n"
        'def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    )
    assert lint(code, "TNL301") == [("TNL301", 12)]
    assert op in messages(code, "TNL301")[0]


def test_module_definition_site_when_not_called_directly():
    code = """\
    import torch
    from torch import nn


    class Norm(nn.Module):
        def __init__(self, eps=1e-8):
            super().__init__()
            self.eps = eps

        def forward(self, x):
            v = x.var(-1, keepdim=True)
            return x / (v + self.eps)


    def train(model, x):
        with torch.autocast("cuda"):
            return model(x)


    def build():
        return Norm()
    """
    assert lint(code, "TNL301") == [("TNL301", 11), ("TNL301", 12)]
    assert messages(code, "TNL301")[0].endswith(
        "under fp16 autocast (example.py:16): compute it in a float32 island "
        "(`.float()` under autocast(enabled=False)) or use bfloat16"
    )


def test_cross_file_module_call_through_index():
    train = 'import torch\nfrom models.heads import Head\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    index = build_index([("models/heads.py", HEAD), ("train.py", train)])
    assert lint(train, "TNL301", path="train.py", index=index) == [("TNL301", 7)]
    assert "`var` at models/heads.py:7" in messages(train, "TNL301", path="train.py", index=index)[0]
    # called directly in a region: reported at the call only, not again at the op
    assert lint(HEAD, "TNL301", path="models/heads.py", index=index) == []


def test_cross_file_definition_site_names_the_autocast():
    train = 'import torch\n\n\ndef run(model, x):\n    with torch.cuda.amp.autocast():\n        return model(x)\n'
    index = build_index([("models/heads.py", HEAD), ("train.py", train + "\n\nmodel = Head()\n")])
    assert lint(HEAD, "TNL301", path="models/heads.py", index=index) == [("TNL301", 7)]
    assert "(train.py:5)" in messages(HEAD, "TNL301", path="models/heads.py", index=index)[0]
    assert lint(train, "TNL301", path="train.py", index=index) == []


def test_cross_file_function_is_reported_without_fix():
    train = 'import torch\nfrom ops import ExpNorm\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return ExpNorm.apply(x)\n'
    index = build_index([("ops.py", FN), ("train.py", train)])
    found = lint_text("train.py", train, [RULES["TNL301"]], index=index)
    assert [(f.code, f.line, f.fix) for f in found] == [("TNL301", 7, None)]
    assert "`ExpNorm` (ops.py:4)" in found[0].message


def test_function_apply_inside_module_forward_is_a_hazard_with_fix():
    code = FN + (
        "\n\nclass Layer(torch.nn.Module):\n    def forward(self, x):\n        return ExpNorm.apply(x)\n"
        '\n\ndef run(model, x):\n    with torch.autocast("cuda"):\n        return model(x)\n'
        "\n\ndef build():\n    return Layer()\n"
    )
    assert lint(code, "TNL301") == [("TNL301", 17)]
    out = fix_text("example.py", code, [RULES["TNL301"]]).text
    assert '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward' in out
    assert '    @staticmethod\n    @torch.amp.custom_bwd(device_type="cuda")\n    def backward' in out
    assert lint(out, "TNL301") == []


def test_fix_adds_cast_inputs_to_existing_custom_fwd():
    code = FN.replace(
        "    @staticmethod\n    def forward", '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda")\n    def forward'
    ) + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return ExpNorm.apply(x)\n'
    out = fix_text("example.py", code, [RULES["TNL301"]]).text
    assert '@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)' in out
    assert "custom_bwd" not in out
    assert lint(out, "TNL301") == []


def test_fix_uses_cpu_device_of_a_cpu_fp16_region():
    code = FN + '\n\ndef step(x):\n    with torch.autocast("cpu", dtype=torch.float16):\n        return ExpNorm.apply(x)\n'
    out = fix_text("example.py", code, [RULES["TNL301"]]).text
    assert '@torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)' in out


# ---------------------------------------------------------------------------------------------
# TNL301: not flagged


@pytest.mark.parametrize(
    "call",
    [
        '    with torch.autocast("cuda", dtype=torch.bfloat16):\n        return ExpNorm.apply(x)\n',
        '    with torch.autocast("cpu"):\n        return ExpNorm.apply(x)\n',
        '    with torch.autocast("cuda", enabled=False):\n        return ExpNorm.apply(x)\n',
        "    with torch.cuda.amp.autocast(enabled=False):\n        return ExpNorm.apply(x)\n",
        "    with torch.cuda.amp.autocast(dtype=torch.bfloat16):\n        return ExpNorm.apply(x)\n",
        '    with torch.autocast(device, dtype=amp_dtype):\n        return ExpNorm.apply(x)\n',
        '    with torch.autocast(device):\n        return ExpNorm.apply(x)\n',
        "    return ExpNorm.apply(x)\n",
        '    with torch.autocast("cuda"):\n        with torch.autocast("cuda", enabled=False):\n            return ExpNorm.apply(x.float())\n',
        '    with torch.autocast("cuda"):\n        y = x @ x\n    return ExpNorm.apply(y.float())\n',
    ],
)
def test_function_apply_look_alikes(call):
    code = FN + "\n\ndef step(x, device, amp_dtype):\n" + call
    assert lint(code, "TNL301") == []


def test_protected_function_not_flagged():
    code = FN.replace(
        "    @staticmethod\n    def forward",
        '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward',
    ) + '\n\ndef step(x):\n    with torch.autocast("cuda"):\n        return ExpNorm.apply(x)\n'
    assert lint(code, "TNL301") == []
    legacy = code.replace('torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)',
                          "torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)")
    assert lint(legacy, "TNL301") == []


@pytest.mark.parametrize(
    "forward",
    [
        "return torch.relu(h) + 1",
        "return h.float().var(-1)",
        "return (h ** 2).mean(-1)",  # pow runs in fp32 under autocast, so does what follows
        "return h / h.norm(dim=-1, keepdim=True)",  # norm is fp32: the division promotes
        "return h / 2.0",
        "return h / h.shape[-1]",
        "return h.masked_fill(h < 0, -1e4)",
        "return h.masked_fill(h < 0, float('-inf'))",
        "return h + 1e-4",
        "return torch.softmax(h, -1) * torch.exp(h)",
        'with torch.autocast("cuda", enabled=False):\n            return h.float().var(-1)',
    ],
)
def test_module_look_alikes(forward):
    code = (
        "import torch\nfrom torch import nn\n\n\nclass Head(nn.Module):\n"
        f"    def forward(self, h):\n        {forward}\n\n\n"
        'def run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    )
    assert lint(code, "TNL301") == []


def test_module_hazards_without_any_fp16_autocast_are_not_flagged():
    assert lint(HEAD + '\n\ndef run(x):\n    with torch.autocast("cuda", dtype=torch.bfloat16):\n        return Head()(x)\n', "TNL301") == []
    assert lint(HEAD, "TNL301") == []


def test_module_protected_by_custom_fwd_is_not_flagged():
    code = HEAD.replace(
        "    def forward", '    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n    def forward'
    ) + '\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    assert lint(code, "TNL301") == []


def test_non_project_classes_are_not_flagged():
    code = """\
    import torch
    from torch import nn


    def run(x):
        m = nn.LayerNorm(8)
        with torch.autocast("cuda"):
            return m(x) + nn.GELU()(x)
    """
    assert lint(code, "TNL301") == []


def test_ambiguous_class_name_is_not_resolved():
    other = HEAD.replace("h.var(-1)", "h + 1")
    train = 'import torch\nfrom somewhere import Head\n\n\ndef run(x):\n    with torch.autocast("cuda"):\n        return Head()(x)\n'
    index = build_index([("a/heads.py", HEAD), ("b/heads.py", other), ("train.py", train)])
    assert lint(train, "TNL301", path="train.py", index=index) == []


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


def test_tnl302_decorator_form():
    code = 'import torch\n\n\n@torch.autocast("cuda")\ndef loss_of(model, x):\n    return model(x).sum()\n\n\ndef fit(model, x):\n    loss_of(model, x).backward()\n'
    assert lint(code, "TNL302") == [("TNL302", 4)]


@pytest.mark.parametrize(
    "autocast",
    ['torch.autocast("cuda", dtype=torch.bfloat16)', 'torch.autocast("cpu")', 'torch.autocast("cuda", enabled=False)',
     'torch.no_grad(), torch.autocast("cuda")'],
)
def test_tnl302_look_alikes(autocast):
    assert lint(TRAIN.format(autocast=autocast), "TNL302") == []


def test_tnl302_no_backward_is_not_flagged():
    assert lint(TRAIN.format(autocast='torch.autocast("cuda")').replace("loss.backward()", "pass"), "TNL302") == []


@pytest.mark.parametrize(
    "scaler",
    ['torch.amp.GradScaler("cuda")', "torch.cuda.amp.GradScaler()", "GradScaler()"],
)
def test_tnl302_scaler_in_the_same_file(scaler):
    code = "from torch.cuda.amp import GradScaler\n" + TRAIN.format(autocast='torch.autocast("cuda")') + f"\nscaler = {scaler}\n"
    assert lint(code, "TNL302") == []


def test_tnl302_scaler_in_another_file():
    train = TRAIN.format(autocast='torch.autocast("cuda")')
    setup = 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n'
    assert lint(train, "TNL302", path="train.py", index=build_index([("train.py", train), ("setup.py", setup)])) == []
    assert lint(train, "TNL302", path="train.py", index=build_index([("train.py", train)])) == [("TNL302", 5)]


def test_tnl302_disabled_scaler_does_not_count():
    code = TRAIN.format(autocast='torch.autocast("cuda")') + '\nscaler = torch.amp.GradScaler("cuda", enabled=False)\n'
    assert lint(code, "TNL302") == [("TNL302", 5)]


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


def test_a_module_class_never_constructed_runs_nowhere():
    code = """\
    import torch
    from torch import nn


    class Stats(nn.Module):
        def forward(self, x):
            return x.var(-1)


    def train(model, x):
        with torch.autocast("cuda"):
            return model(x)
    """
    assert lint(code, "TNL301") == []
    derived = textwrap.dedent(code) + "\n\nclass Sub(Stats):\n    pass\n\n\nmodel = Sub()\n"
    assert lint(derived, "TNL301") == [("TNL301", 7)]


def test_tnl306_removes_only_the_deprecated_names_nothing_uses():
    code = "from torch.cuda.amp import GradScaler, autocast\n\n\ndef f(s):\n    with autocast():\n        return isinstance(s, GradScaler)\n"
    assert fixed306(code) == (
        "from torch.cuda.amp import GradScaler\nimport torch\n\n\ndef f(s):\n"
        '    with torch.amp.autocast("cuda"):\n        return isinstance(s, GradScaler)\n'
    )
