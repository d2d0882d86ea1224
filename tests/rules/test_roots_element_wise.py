"""TNL206 on element-wise sums of squares under a root (issue 16, item 7): `sqrt(gx * gx + gy * gy)`,
`(dx ** 2 + dy ** 2).sqrt()`, `torch.sqrt(dx.pow(2) + dy.pow(2))`, a gradient magnitude, an edge
map, the length of a step between consecutive points. Where every component is a difference of
neighbouring entries, a flat region makes all of them 0 at once and the root's gradient NaN
(measured on torch 2.13: an 8 x 8 image with one edge, 62 of 64 gradient entries NaN); reported by
default where a gradient flows. Look-alikes: a guard, gradient-free code, a pseudo-Huber loss's
constant, box sides, components with no evidence (strict mode only)."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

FLAGGED = [
    Flagged(  # an edge-aware loss on a predicted depth map: flat regions are common
        """\
        import torch
        import torch.nn as nn

        class GradientMagnitudeLoss(nn.Module):
            def forward(self, depth, target):
                gx = depth[:, :, :, 1:] - depth[:, :, :, :-1]
                gy = depth[:, :, 1:, :] - depth[:, :, :-1, :]
                mag = torch.sqrt(gx[:, :, :-1, :] * gx[:, :, :-1, :] + gy[:, :, :, :-1] * gy[:, :, :, :-1])
                return (mag - target).abs().mean()
        """,
        (8,),
        """\
        import torch
        import torch.nn as nn

        class GradientMagnitudeLoss(nn.Module):
            def forward(self, depth, target):
                gx = depth[:, :, :, 1:] - depth[:, :, :, :-1]
                gy = depth[:, :, 1:, :] - depth[:, :, :-1, :]
                mag = torch.sqrt((gx[:, :, :-1, :] * gx[:, :, :-1, :] + gy[:, :, :, :-1] * gy[:, :, :, :-1]).clamp_min(1e-12))
                return (mag - target).abs().mean()
        """,
        message="where neighbouring values are equal",
    ),
    Flagged(  # torch.diff and the method-form root, in a training step
        """\
        import torch

        def train_step(model, opt, img):
            out = model(img)
            dx = torch.diff(out, dim=-1)[..., :-1, :]
            dy = torch.diff(out, dim=-2)[..., :-1]
            edges = (dx ** 2 + dy ** 2).sqrt()
            loss = edges.mean()
            loss.backward()
            opt.step()
        """,
        (7,),
        """\
        import torch

        def train_step(model, opt, img):
            out = model(img)
            dx = torch.diff(out, dim=-1)[..., :-1, :]
            dy = torch.diff(out, dim=-2)[..., :-1]
            edges = (dx ** 2 + dy ** 2).clamp_min(1e-12).sqrt()
            loss = edges.mean()
            loss.backward()
            opt.step()
        """,
    ),
    Flagged(  # step lengths of a predicted trajectory: a stationary agent repeats its point
        """\
        import torch
        import torch.nn as nn

        class PathLength(nn.Module):
            def forward(self, traj):
                dx = traj[:, 1:, 0] - traj[:, :-1, 0]
                dy = traj[:, 1:, 1] - traj[:, :-1, 1]
                return torch.sqrt(dx.pow(2) + dy.pow(2)).sum(-1)
        """,
        (8,),
        """\
        import torch
        import torch.nn as nn

        class PathLength(nn.Module):
            def forward(self, traj):
                dx = traj[:, 1:, 0] - traj[:, :-1, 0]
                dy = traj[:, 1:, 1] - traj[:, :-1, 1]
                return torch.sqrt((dx.pow(2) + dy.pow(2)).clamp_min(1e-12)).sum(-1)
        """,
    ),
    Flagged(  # Sobel responses: no evidence in the code that both are 0 together, strict mode only
        """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class SobelLoss(nn.Module):
            def forward(self, pred, kx, ky):
                gx = F.conv2d(pred, kx, padding=1)
                gy = F.conv2d(pred, ky, padding=1)
                return torch.sqrt(gx ** 2 + gy ** 2).mean()
        """,
        (9,),
        """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class SobelLoss(nn.Module):
            def forward(self, pred, kx, ky):
                gx = F.conv2d(pred, kx, padding=1)
                gy = F.conv2d(pred, ky, padding=1)
                return torch.sqrt((gx ** 2 + gy ** 2).clamp_min(1e-12)).mean()
        """,
        strict=True,
    ),
]

SILENT = [
    Silent("""\
        import torch
        import torch.nn as nn

        class GradientMagnitudeLoss(nn.Module):
            def forward(self, depth):
                gx = depth[:, :, :-1, 1:] - depth[:, :, :-1, :-1]
                gy = depth[:, :, 1:, :-1] - depth[:, :, :-1, :-1]
                return torch.sqrt(gx ** 2 + gy ** 2 + 1e-6).mean()
        """),
    Silent(  # an edge map for data augmentation: no gradient flows
        """\
        import torch

        @torch.no_grad()
        def edge_map(img):
            gx = img[..., 1:] - img[..., :-1]
            gy = img[..., 1:, :] - img[..., :-1, :]
            return torch.sqrt(gx[..., :-1, :] ** 2 + gy[..., :-1] ** 2)
        """,
        strict=True,
    ),
    Silent(  # a pseudo-Huber loss: the constant's square keeps the root above c
        """\
        import torch

        def pseudo_huber(pred, target, c: float = 0.03):
            return torch.mean(torch.sqrt((pred - target) ** 2 + c ** 2) - c)
        """,
        strict=True,
    ),
    Silent("""\
        import torch
        import torch.nn as nn

        class BoxDiagonal(nn.Module):
            def forward(self, boxes):
                wh = boxes[:, 2:] - boxes[:, :2]
                return torch.sqrt(wh[:, 0] ** 2 + wh[:, 1] ** 2)
        """),
    Silent(  # one component a finite difference, the other unknown: the length needs both at 0
        """\
        import torch
        import torch.nn as nn

        class Slope(nn.Module):
            def forward(self, height, step):
                dh = height[:, 1:] - height[:, :-1]
                return torch.sqrt(dh ** 2 + step ** 2)
        """
    ),
    Silent(  # a vector's components from forward's input: at the origin only for no normal input
        """\
        import torch
        import torch.nn as nn

        class Speed(nn.Module):
            def forward(self, vel):
                return torch.sqrt(vel[..., 0] ** 2 + vel[..., 1] ** 2)
        """
    ),
    Silent(  # the Sobel responses by default
        """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class SobelLoss(nn.Module):
            def forward(self, pred, kx, ky):
                gx = F.conv2d(pred, kx, padding=1)
                gy = F.conv2d(pred, ky, padding=1)
                return torch.sqrt(gx ** 2 + gy ** 2).mean()
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL206", FLAGGED, SILENT))
def test_element_wise_sums_of_squares(code, case):
    harness.check(code, case)
