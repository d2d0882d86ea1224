"""TNL210 atan-of-ratio: the heading `atan(v_y / v_x)` of a velocity at rest is NaN (0 / 0), of a
vertical one has a NaN gradient (x = 0), of one pointing left is off by pi; atan2 is the angle.

float32 only: the hazard is the formula's (a zero component), not a precision's.

Further: 3-D and 4-D (leading batch dims; the components stay the last dim, as `[..., 0]` and
`[..., 1]` read them) and the velocities times 1e-3 and 1e3 (an angle is scale-free).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Bound, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import lifted, put, rescaled, spanning

# atan2 is the angle itself: the fix matches the reference up to rounding everywhere, also where
# it changes the original's value (x < 0: by pi)
ANGLE = Bound(
    "atan2 is the angle: where x < 0 it differs from atan(y / x) by pi and equals the reference; "
    "elsewhere within float32 rounding of pi (4 ulps)",
    abs=4 * 3.2e-7,
)


def angle(vel: torch.Tensor) -> torch.Tensor:
    """The polar angle of (v_x, v_y) = (vel[..., 0], vel[..., 1]) in (-pi, pi], 0 at the origin:
    the argument of the complex number v_x + i v_y."""
    return torch.angle(torch.complex(vel[..., 0], vel[..., 1]))


def edge_velocities(ctx: ReproContext) -> Inputs:
    """vel: 6 vectors: at rest (0, 0), vertical (0, 1) and (0, -2), pointing left (-1, 1) and
    (-2, -0.5), and one to the right (3, 1)."""
    vel = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, -2.0], [-1.0, 1.0], [-2.0, -0.5], [3.0, 1.0]])
    return put(ctx, vel=vel)


def rightward_velocities(ctx: ReproContext) -> Inputs:
    """vel: 8 vectors with v_x > 0 of magnitude 1e-3 .. 1e3 and v_y of either sign (atan(y / x) is
    the angle there)."""
    vx = spanning((8,), 1e-3, 1e3, 2101, signed=False)
    vy = spanning((8,), 1e-3, 1e3, 2102)
    return put(ctx, vel=torch.stack([vx, vy], -1))


REPRO = Repro(
    "TNL210",
    "NF",
    "heading",
    FP32,
    adversarial=edge_velocities,
    benign=rightward_velocities,
    grad=("vel",),
    reference=angle,
    bound=ANGLE,
    shapes=lifted(rightward_velocities) + rescaled(rightward_velocities, 1e-3, 1e3),
    thresholds={
        "*": "6 velocities: (0, 0) (NaN), (0, 1) and (0, -2) (NaN gradient), (-1, 1) and (-2, -0.5) "
        "(off by pi), (3, 1); benign: v_x > 0, magnitudes 1e-3 .. 1e3"
    },
)
