"""TNL307 clip-scaled-gradients: `clip_grad_norm_` between `scaler.scale(loss).backward()` and
`scaler.step(optimizer)` clips gradients that still hold the loss scale.

Run under CUDA's autocast policy (cuda_policy.py, on the CPU; the example's GradScaler("cuda")
scales on the CPU): the scaler starts at 65536, so the clip sees a gradient norm 65536 times the
real one and shrinks the gradients 65536 times too far; `step` then unscales them. Measured (torch
2.13 CPU, the inputs below): real gradient norm 1.57, the weight moves by 1.5e-6 instead of 0.1
(max_norm 1, lr 0.1). The fix unscales first: the weight moves by 0.1, within 8.2e-6 of the
float64 step.

The reference is one SGD step of the definition in float64: the mean squared error's gradient,
scaled by min(1, max_norm / (norm + 1e-6)) as `clip_grad_norm_` defines the clip.

Further: x and y with leading batch dims, 3-D and 4-D (a linear layer acts on the last dim; its
weight w stays 2-D), where a gradient summed over the wrong dims or a mean over the wrong count
shows. No scale applies: the benign region is a gradient norm below 1 / 65536, where the clip acts
on neither the scaled nor the real gradients; x and y times s scale the gradient by s^2 (measured
in float64: real norms 3.9e-13, 3.9e-7, 0.39 at s = 1e-3, 1, 1e3), so times 1e3 the scaled
gradients (norm 2.5e4) are clipped, the hazard itself, and times 1e-3 the step (1.2e-14) says
nothing. Even at s = 1 the step's largest entry (1.2e-8) is below float32's resolution of w
(entries up to 1): the benign runs check that the fix leaves w where the mathematics does, not
the size of an unclipped step.
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put


def clipped_sgd_step(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """w - 0.1 * clip(grad), grad of mean((x w^T - y)^2) in w, clipped to norm 1; the rows of x
    and y are every position of their leading dims."""
    rows = x.reshape(-1, x.shape[-1])
    residual = rows @ w.transpose(0, 1) - y.reshape(-1, y.shape[-1])
    grad = 2 * residual.transpose(0, 1) @ rows / residual.numel()
    coef = torch.clamp(1.0 / (torch.linalg.vector_norm(grad) + 1e-6), max=1.0)
    return w - 0.1 * grad * coef


def on_half_grid(ctx: ReproContext, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> Inputs:
    """The tensors rounded to float16's grid (the linear layer's inputs under autocast)."""
    return put(ctx, x=x.half().float(), y=y, w=w.half().float())


def large_gradients(ctx: ReproContext) -> Inputs:
    """x 32 x 16 randn, w 8 x 16 randn * 0.05, targets randn * 4: gradient norm 1.57 (measured),
    above max_norm 1, so the clip acts; 65536 times that in the scaled gradients."""
    g = gen(307)
    x, w = torch.randn(32, 16, generator=g), torch.randn(8, 16, generator=g) * 0.05
    return on_half_grid(ctx, x, torch.randn(32, 8, generator=g) * 4, w)


def tiny_gradients(ctx: ReproContext) -> Inputs:
    """x in {-1, 0, 1}, w in multiples of 1/8 (the float16 product is exact), targets within 1e-6
    of x w^T: gradient norm below 1 / 65536, so neither the scaled nor the real gradients are
    clipped and both steps are the plain SGD step."""
    g = gen(3071)
    x = torch.randint(-1, 2, (32, 16), generator=g).float()
    w = torch.randint(-8, 9, (8, 16), generator=g).float() / 8
    return on_half_grid(ctx, x, x @ w.T + 1e-6 * torch.randn(32, 8, generator=g), w)


REPRO = Repro(
    "TNL307",
    "WV",
    "train_step",
    ("autocast",),
    adversarial=large_gradients,
    benign=tiny_gradients,
    reference=clipped_sgd_step,
    shapes=lifted(tiny_gradients, keep=("w",)),
    thresholds={"*": "GradScaler init_scale 65536, max_norm 1: real gradient norm 1.57, the clip sees 65536 times it"},
)
