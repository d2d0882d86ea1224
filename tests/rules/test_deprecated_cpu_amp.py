"""TNL306 also covers `torch.cpu.amp.autocast` (FutureWarning in torch 2.13, like the
`torch.cuda.amp` spellings): rewritten to `torch.amp.autocast("cpu", ...)`, which defaults to
bfloat16 as the old spelling does; positional arguments become keywords."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL306"

FLAGGED = [
    Flagged(
        """\
        import torch


        def evaluate(model, batch):
            with torch.cpu.amp.autocast():
                return model(batch)
        """,
        lines=(5,),
        fixed="""\
        import torch


        def evaluate(model, batch):
            with torch.amp.autocast("cpu"):
                return model(batch)
        """,
        message='torch.amp.autocast("cpu", ...)',
    ),
    Flagged(
        """\
        import torch
        from torch.cpu.amp import autocast


        def evaluate(model, batch, use_amp):
            with autocast(use_amp, dtype=torch.bfloat16):
                return model(batch)
        """,
        lines=(6,),
        fixed="""\
        import torch


        def evaluate(model, batch, use_amp):
            with torch.amp.autocast("cpu", enabled=use_amp, dtype=torch.bfloat16):
                return model(batch)
        """,
    ),
]

SILENT = [
    Silent(
        """\
        import torch


        def evaluate(model, batch):
            with torch.amp.autocast("cpu"):
                return model(batch)
        """
    ),
    Silent(
        """\
        import torch


        def evaluate(model, batch):
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                return model(batch)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_deprecated_cpu_amp(code, case):
    harness.check(code, case)
