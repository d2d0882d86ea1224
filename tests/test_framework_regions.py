"""fp16 regions from every framework (issue 17 item 2): Accelerate, Lightning, DeepSpeed and
`.half()` models make a project module's forward run in float16 as an fp16 autocast does; the
finding cites the call and what turns float16 on. Not float16: bfloat16 settings, float32 default
precisions, a `.half()` of a tensor."""

import textwrap

import pytest

from torchnumlint.engine import lint_text
from torchnumlint.index import build_index
from torchnumlint.rules.registry import registry

MODELS = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Energy(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, d)

        def forward(self, x):
            h = self.fc(x)
            return h * h
    """
)

FLAGGED = {
    "accelerate-prepare": (
        """\
        from accelerate import Accelerator
        from models import Energy


        def main(loader):
            accelerator = Accelerator(mixed_precision="fp16")
            model = Energy(8)
            model, loader = accelerator.prepare(model, loader)
            for x in loader:
                accelerator.backward(model(x).mean())
        """,
        "train.py:8, Accelerate's fp16 mixed precision)",
    ),
    "accelerate-autocast-from-args": (
        """\
        from accelerate import Accelerator
        from models import Energy


        def main(loader, args):
            accelerator = Accelerator(mixed_precision=args.mixed_precision)
            model = Energy(8)
            for x in loader:
                with accelerator.autocast():
                    loss = model(x).mean()
                accelerator.backward(loss)
        """,
        "train.py:9, Accelerate's fp16 mixed precision, if its precision setting is fp16)",
    ),
    "lightning-16-mixed": (
        """\
        import lightning as L
        from models import Energy

        trainer = L.Trainer(precision="16-mixed", max_epochs=3)
        model = Energy(8)
        trainer.fit(model)
        """,
        "train.py:6, Lightning's 16-bit mixed precision)",
    ),
    "lightning-1x-16": (
        """\
        import pytorch_lightning as pl
        from models import Energy


        def run():
            trainer = pl.Trainer(precision=16, gpus=1)
            trainer.fit(Energy(8))
        """,
        "train.py:7, Lightning's 16-bit mixed precision)",
    ),
    "deepspeed-fp16-config": (
        """\
        import deepspeed
        from models import Energy


        def main():
            ds_config = {"train_batch_size": 8, "fp16": {"enabled": True}}
            model = Energy(8)
            engine, opt, _, _ = deepspeed.initialize(model=model, config=ds_config, model_parameters=model.parameters())
        """,
        "train.py:8, DeepSpeed's fp16)",
    ),
    "half-model": (
        """\
        import torch
        from models import Energy


        def main(loader):
            model = Energy(8).cuda().half()
            for x in loader:
                model(x.half()).mean().backward()
        """,
        "train.py:6, a float16 model)",
    ),
    "to-float16": (
        """\
        import torch
        from models import Energy

        model = Energy(8)
        model.to("cuda", torch.float16)
        """,
        "train.py:5, a float16 model)",
    ),
}

SILENT = {
    "accelerate-bf16": """\
        from accelerate import Accelerator
        from models import Energy


        def main(loader):
            accelerator = Accelerator(mixed_precision="bf16")
            model, loader = accelerator.prepare(Energy(8), loader)
            with accelerator.autocast():
                model(loader).mean()
        """,
    "lightning-default-precision": """\
        import lightning as L
        from models import Energy

        trainer = L.Trainer(max_epochs=3)
        trainer.fit(Energy(8))
        """,
    "lightning-bf16": """\
        import lightning as L
        from models import Energy

        trainer = L.Trainer(precision="bf16-mixed")
        model = Energy(8)
        trainer.fit(model)
        """,
    "deepspeed-bf16": """\
        import deepspeed
        from models import Energy


        def main():
            ds_config = {"train_batch_size": 8, "bf16": {"enabled": True}}
            model = Energy(8)
            deepspeed.initialize(model=model, config=ds_config)
        """,
    "half-and-back": """\
        import torch
        from models import Energy


        def main(loader):
            model = Energy(8)
            model.half().float()  # rounds the weights to float16's grid, trains in float32
            for x in loader:
                model(x).mean().backward()
        """,
    "half-of-a-tensor": """\
        import torch
        from models import Energy


        def main(x):
            model = Energy(8)
            return model(x).half()
        """,
}


def lint_models(train):
    index = build_index([("models.py", MODELS), ("train.py", textwrap.dedent(train))])
    return [(f.line, f.message) for f in lint_text("models.py", MODELS, [registry()["TNL301"]], index=index)]


@pytest.mark.parametrize("train, region", FLAGGED.values(), ids=list(FLAGGED))
def test_framework_fp16_reaches_the_module(train, region):
    found = lint_models(train)
    assert [line for line, _ in found] == [12]
    assert region in found[0][1]


@pytest.mark.parametrize("train", SILENT.values(), ids=list(SILENT))
def test_not_float16(train):
    assert lint_models(train) == []
