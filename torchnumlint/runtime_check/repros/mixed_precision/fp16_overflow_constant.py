"""TNL305 fp16-overflow-constant: `scores.masked_fill(~mask, -1e9)` on float16 scores raises.

Run under CUDA's autocast policy (cuda_policy.py, on the CPU): `q @ k.transpose(-2, -1)` is a
matmul, float16 on CUDA; `masked_fill` is not autocast, so it fills the float16 scores and -1e9
does not fit. Measured (torch 2.13 CPU): "value cannot be converted to type c10::Half without
overflow" for any |c| > 65504 (-65504 fills, -65505 raises). The fix fills with
`torch.finfo(scores.dtype).min`; after the softmax the masked keys get 0, as the definition says.

The reference is masked attention of the definition in float64: softmax over the unmasked keys
only, the masked ones weighing 0. Every row keeps at least one key (a row with none has no
softmax; TNL401's business). No benign inputs: in float16 the original raises for every input
(the constant is converted before the mask is read: measured, an all-False mask raises too), so
the fix is judged against the reference on the masked inputs, scores from near-uniform to
one-hot weights.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum over the kept keys j of softmax_j(q k_j / sqrt(d)) v_j."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values) * mask
    return (weights / weights.sum(dim=-1, keepdim=True)) @ v


def _inputs(ctx: ReproContext, seed: int, scale: float) -> Inputs:
    """q, k, v: 2 x 8 tokens x 16 channels randn * scale on float16's grid; the mask keeps key 0
    and a random half of the others."""
    g = gen(seed)
    q, k, v = (torch.randn(2, 8, 16, generator=g) * scale for _ in range(3))
    mask = torch.rand(2, 8, 8, generator=g) < 0.5
    mask[..., 0] = True
    return put(ctx, q=q.half().float(), k=k.half().float(), v=v.half().float(), mask=mask)


def masked(ctx: ReproContext) -> Inputs:
    """Scores up to ~40 apart: the kept keys' weights from near-uniform to one-hot."""
    return _inputs(ctx, 305, 2.0)


REPRO = Repro(
    "TNL305",
    "ERR",
    "attend",
    ("autocast",),
    adversarial=masked,
    grad=("q", "k", "v"),
    reference=masked_attention,
    error_match="cannot be converted to type c10::Half without overflow",
    thresholds={"*": "float16 scores (a matmul under CUDA autocast) filled with -1e9: beyond 65504"},
)
