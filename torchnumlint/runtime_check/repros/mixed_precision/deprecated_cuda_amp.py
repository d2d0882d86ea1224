"""TNL306 deprecated-cuda-amp: `torch.cuda.amp.autocast()` warns (FutureWarning); the
`torch.amp.autocast("cuda")` spelling does not and computes the same values."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Repro
from torchnumlint.runtime_check.repros.inputs import gen, put

REPRO = Repro(
    "TNL306", "WARN", "forward_fp16", ("autocast",),
    adversarial=lambda ctx: put(ctx, x=torch.randn(4, 8, generator=gen(306)),
                                w=torch.randn(8, 4, generator=gen(3061))),
    thresholds={"*": "x 4 x 8 @ w 8 x 4 under the deprecated torch.cuda.amp.autocast()"},
)
