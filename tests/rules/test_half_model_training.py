"""TNL304 half-model-training: a module cast to float16 and then given to an optimizer, in training
code as it is written (a script's main, a trainer's setup, a method, through `.to(dtype=...)`), and
the look-alikes: inference and export casts, casts straight back, bfloat16, another module's
optimizer, an optimizer built before the cast."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL304"

FLAGGED = [
    Flagged("""\
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
        """, (5,), message="`torch.optim.Adam` on line 6"),
    Flagged("""\
        import torch

        def fit(model, data):
            model.half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            for x in data:
                model(x).mean().backward()
                optimizer.step()
        """, (4,), message="`model` is cast to float16 (model.half())"),
    Flagged("""\
        import torch

        def setup(net, device):
            net = net.to(device, torch.float16)
            return net, torch.optim.AdamW(net.parameters(), weight_decay=0.05)
        """, (4,)),
    Flagged("""\
        import torch

        def setup(net):
            net = net.to(dtype=torch.half)
            return torch.optim.RMSprop(list(net.parameters()))
        """, (4,)),
    Flagged("""\
        import torch
        from torch import nn

        class Trainer:
            def __init__(self, cfg):
                self.model = build(cfg).half()
                self.optim = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        """, (6,), message="`self.model`"),
    Flagged("""\
        import torch
        import torchvision

        model = torchvision.models.resnet18().cuda()
        if True:
            model = model.half()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """, (6,)),
    Flagged("""\
        import torch
        from torch import optim

        def finetune(encoder, loader):
            encoder = encoder.half().train()
            opt = optim.Adam(encoder.parameters())
            for batch in loader:
                encoder(batch).pow(2).mean().backward()
                opt.step()
        """, (5,)),
    Flagged("""\
        import torch

        def step_all(gen, disc):
            gen.half()
            disc.half()
            opt_g = torch.optim.Adam(gen.parameters())
            opt_d = torch.optim.Adam(disc.parameters())
            return opt_g, opt_d
        """, (4, 5)),
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

        def fit(model):
            model = model.half().float()
            return torch.optim.Adam(model.parameters())
        """),
    # bfloat16 trains
    Silent("""\
        import torch

        def fit(model):
            model = model.to(torch.bfloat16)
            return torch.optim.Adam(model.parameters())
        """),
    # the optimizer trains another module
    Silent("""\
        import torch

        def fit(student, teacher):
            teacher = teacher.half().eval()
            return torch.optim.Adam(student.parameters())
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
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_half_model_training(code, case):
    harness.check(code, case)
