"""TNL304 half-model-training: a module cast to float16 and then trained by a plain `torch.optim`
optimizer stepped in a loop (a script's main, a trainer class, a fine-tuning helper, through
`.to(dtype=...)`), a float16 weight average with a decay close to 1 (an EMA class, a function, an
`AveragedModel`), and the look-alikes: inference and export casts, casts straight back, bfloat16,
another module's optimizer, an optimizer built before the cast, float16 trained on purpose behind a
float32 master copy (fairseq's FP16Optimizer, apex, DeepSpeed), a one-step unit test of float16
code, a float16 copy of an average made for a checkpoint, and a decay far enough from 1."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL304"

FLAGGED = [
    Flagged(
        """\
        import torch
        from torch import nn

        def main(train_loader):
            model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)).cuda().half()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x, y in train_loader:
                loss = nn.functional.cross_entropy(model(x.cuda().half()), y.cuda())
                opt.zero_grad()
                loss.backward()
                opt.step()
        """,
        (5,),
        message="`torch.optim.Adam` on line 6, stepped in a loop on line 11",
    ),
    Flagged(
        """\
        import torch

        def fit(model, data):
            model.half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            for x in data:
                model(x).mean().backward()
                optimizer.step()
        """,
        (4,),
        message="`model` is a float16 model (model.half())",
    ),
    # a trainer builds the optimizer; its training step steps it once per batch
    Flagged(
        """\
        import torch
        from torch import nn

        class Trainer:
            def __init__(self, cfg):
                self.model = build(cfg).half()
                self.optim = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)

            def train_step(self, batch):
                loss = self.model(batch).mean()
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
                return loss
        """,
        (6,),
        message="`self.model` is a float16 model (build(cfg).half()) trained by `torch.optim.Adam` on line 7, stepped by the class on line 13",
    ),
    Flagged(
        """\
        import torch
        import torchvision

        model = torchvision.models.resnet18().cuda()
        if True:
            model = model.half()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images.cuda().half()), labels.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        (6,),
    ),
    Flagged(
        """\
        import torch
        from torch import optim

        def finetune(encoder, loader, epochs):
            encoder = encoder.half().train()
            opt = optim.Adam(encoder.parameters())
            epoch = 0
            while epoch < epochs:
                for batch in loader:
                    encoder(batch).pow(2).mean().backward()
                    opt.step()
                epoch += 1
        """,
        (5,),
    ),
    # handed elsewhere: no loop that steps it in sight, strict mode only
    Flagged(
        """\
        import torch

        def setup(net, device):
            net = net.to(device, torch.float16)
            return net, torch.optim.AdamW(net.parameters(), weight_decay=0.05)
        """,
        (4,),
        strict=True,
        message="strict mode",
    ),
    Flagged(
        """\
        import torch

        def step_all(gen, disc):
            gen.half()
            disc.half()
            opt_g = torch.optim.Adam(gen.parameters())
            opt_d = torch.optim.Adam(disc.parameters())
            return opt_g, opt_d
        """,
        (4, 5),
        strict=True,
        message="strict mode",
    ),
    # an EMA kept in float16 (the shape a detector's utilities had before they moved it to float32)
    Flagged(
        """\
        import math
        from copy import deepcopy

        import torch

        class ModelEMA:
            def __init__(self, model, decay=0.9999, updates=0):
                self.ema = deepcopy(model).half().eval()
                self.updates = updates
                self.decay = lambda x: decay * (1 - math.exp(-x / 2000))
                for p in self.ema.parameters():
                    p.requires_grad_(False)

            def update(self, model):
                with torch.no_grad():
                    self.updates += 1
                    d = self.decay(self.updates)
                    msd = model.state_dict()
                    for k, v in self.ema.state_dict().items():
                        if v.dtype.is_floating_point:
                            v *= d
                            v += (1 - d) * msd[k].detach()
        """,
        (8,),
        message="`self.ema` is a float16 weight average (deepcopy(model).half().eval()) with decay 0.9999 (line 7)",
    ),
    # the same, cast in place where a GPU is found
    Flagged(
        """\
        from copy import deepcopy

        import torch

        class WeightEMA:
            def __init__(self, model, ema_decay=0.9998):
                self.shadow = deepcopy(model).eval()
                if next(model.parameters()).is_cuda:
                    self.shadow.half()
                self.ema_decay = ema_decay

            @torch.no_grad()
            def step(self, model):
                for s, p in zip(self.shadow.parameters(), model.parameters()):
                    s.lerp_(p.to(s.dtype), 1 - self.ema_decay)
        """,
        (9,),
        message="decay 0.9998 (line 6)",
    ),
    # a function keeping its own average
    Flagged(
        """\
        import copy
        import torch

        def train(model, loader, opt):
            ema_decay = 0.9995
            ema = copy.deepcopy(model).to(dtype=torch.float16)
            for x, y in loader:
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
                opt.zero_grad()
                with torch.no_grad():
                    torch._foreach_lerp_(list(ema.parameters()), [p.half() for p in model.parameters()], 1 - ema_decay)
            return ema
        """,
        (6,),
    ),
    # torch's own averaging wrapper, cast to float16
    Flagged(
        """\
        import torch
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        def fit(model, loader, opt):
            swa = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9999)).half()
            for x in loader:
                model(x).sum().backward()
                opt.step()
                swa.update_parameters(model)
            return swa
        """,
        (5,),
    ),
]

SILENT = [
    # inference and export only
    Silent("""\
        import torch

        def export(model, x):
            model = model.half().eval()
            with torch.no_grad():
                return model(x.half())
        """),
    # cast straight back
    Silent("""\
        import torch

        def fit(model, loader):
            model = model.half().float()
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """),
    # bfloat16 trains
    Silent("""\
        import torch

        def fit(model, loader):
            model = model.to(torch.bfloat16)
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                model(x).sum().backward()
                opt.step()
        """),
    # the optimizer trains another module
    Silent("""\
        import torch

        def fit(student, teacher, loader):
            teacher = teacher.half().eval()
            opt = torch.optim.Adam(student.parameters())
            for x in loader:
                student(x).sum().backward()
                opt.step()
        """),
    # the optimizer comes first; the cast is for saving afterwards
    Silent("""\
        import torch

        def train_then_save(model, path):
            opt = torch.optim.Adam(model.parameters())
            model.float()
            torch.save(model.half().state_dict(), path)
            return opt
        """),
    # float32 weights under autocast
    Silent("""\
        import torch

        def fit(model, loader):
            opt = torch.optim.Adam(model.parameters())
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x).mean()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        """),
    # a tensor cast to half, not a module
    Silent("""\
        import torch

        def step(model, x):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            h = x.half()
            return opt, h
        """),
    # the cast in another function
    Silent("""\
        import torch

        def to_half(model):
            return model.half()

        def fit(model):
            return torch.optim.Adam(model.parameters())
        """),
    # a unit test of float16 code: one step, no training loop
    Silent("""\
        import torch

        class TestAverage:
            def test_one_step_fp16(self):
                model = DummyModule().cuda().half()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                model(torch.randn(32).cuda().half()).sum().backward()
                optimizer.step()
                assert all(p.dtype == torch.float16 for p in model.parameters())
        """),
    # apex's FP16_Optimizer keeps float32 master weights and steps them
    Silent("""\
        import torch
        from apex.fp16_utils import FP16_Optimizer

        def main(model, loader):
            model = model.cuda().half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            optimizer = FP16_Optimizer(optimizer, dynamic_loss_scale=True)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                optimizer.backward(loss)
                optimizer.step()
        """),
    # fairseq's wrapper: the float16 parameters are stepped through their float32 copies
    Silent("""\
        import torch
        from fairseq.optim.fp16_optimizer import MemoryEfficientFP16Optimizer

        def train(cfg, model, batches):
            model = model.cuda().half()
            inner = torch.optim.Adam(model.parameters(), lr=cfg.lr)
            optimizer = MemoryEfficientFP16Optimizer(cfg, list(model.parameters()), inner)
            for batch in batches:
                optimizer.backward(model(batch).sum())
                optimizer.step()
        """),
    # apex amp and DeepSpeed keep float32 master weights
    Silent("""\
        import torch
        from apex import amp

        def train(model, loader):
            model = model.cuda().half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
            for x in loader:
                with amp.scale_loss(model(x).sum(), optimizer) as scaled:
                    scaled.backward()
                optimizer.step()
        """),
    Silent("""\
        import deepspeed
        import torch

        def train(model, loader, ds_config):
            model = model.half()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
            for x in loader:
                engine.backward(engine(x).sum())
                optimizer.step()
        """),
    # a float16 copy of a float32 average, made for the checkpoint
    Silent("""\
        from copy import deepcopy

        import torch

        def save(epoch, model, ema, optimizer, path):
            ckpt = {
                "epoch": epoch,
                "model": deepcopy(model).half(),
                "ema": deepcopy(ema.ema).half(),
                "optimizer": optimizer.state_dict(),
            }
            torch.save(ckpt, path)
        """),
    # the float32 EMA of a class that also writes a float16 copy to disk
    Silent("""\
        from copy import deepcopy

        import torch

        class ModelEMA:
            def __init__(self, model, decay=0.9999):
                self.ema = deepcopy(model).eval()
                self.decay = decay

            def update(self, model):
                with torch.no_grad():
                    for e, p in zip(self.ema.parameters(), model.parameters()):
                        e.mul_(self.decay).add_(p, alpha=1 - self.decay)

            def save(self, path):
                half = deepcopy(self.ema).half()
                torch.save(half.state_dict(), path)
        """),
    # a float16 average with a decay of 0.99: each increment still moves it
    Silent("""\
        import copy
        import torch

        def track(model, steps, decay=0.99):
            ema = copy.deepcopy(model).half()
            for _ in range(steps):
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.mul_(decay).add_(p.half(), alpha=1 - decay)
            return ema
        """),
    # a float16 teacher copied for distillation, not averaged; Adam's beta 0.999 is no decay
    Silent("""\
        import copy
        import torch

        def distil(student, loader):
            teacher = copy.deepcopy(student).half().eval()
            opt = torch.optim.Adam(student.parameters(), betas=(0.9, 0.999))
            for x in loader:
                with torch.no_grad():
                    target = teacher(x.half()).float()
                torch.nn.functional.mse_loss(student(x), target).backward()
                opt.step()
        """),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_half_model_training(code, case):
    harness.check(code, case)
