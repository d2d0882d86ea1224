"""TNL402 label-smoothing-inf-logits: cross entropy with label_smoothing=0.1 on logits with some
classes filled with -inf is inf (smoothing reads -log p of every class); the rule's first good
snippet, smoothing over the valid classes only, is finite and equals the usual smoothing where
no class is masked (the benign inputs)."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def _inputs(ctx: ReproContext, seed: int, masked: int) -> Inputs:
    logits = torch.randn(4, 10, generator=gen(seed)) * 2.0
    invalid = torch.zeros(4, 10, dtype=torch.bool)
    invalid[:, 10 - masked:] = True  # the last `masked` classes are invalid in every row
    target = torch.randint(0, 10 - masked, (4,), generator=gen(seed + 1))  # a valid class
    return put(ctx, logits=logits, invalid=invalid, target=target)


REPRO = Repro(
    "TNL402", "NF", "masked_ce", PRECISION,
    adversarial=lambda ctx: _inputs(ctx, 402, 3),
    benign=lambda ctx: _inputs(ctx, 4021, 0),
    grad=("logits",),
    thresholds={"*": "4 x 10 logits, 3 classes per row filled with -inf, label_smoothing=0.1"},
    fixed_from="good",
)
