"""TNL210 atan-of-ratio: the angle of a vector written `atan(y / x)`, rewritten `atan2(y, x)`;
the look-alikes left alone."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

TNL210_FLAGGED = [
    Flagged(  # a heading from a velocity's components
        """\
        import torch

        def heading(vel):
            return torch.atan(vel[..., 1] / vel[..., 0])
        """,
        (4,),
        """\
        import torch

        def heading(vel):
            return torch.atan2(vel[..., 1], vel[..., 0])
        """,
    ),
    Flagged(  # dy / dx through a name, arctan
        """\
        import torch

        def segment_angles(points):
            dx = points[1:, 0] - points[:-1, 0]
            dy = points[1:, 1] - points[:-1, 1]
            slope = dy / dx
            return torch.arctan(slope)
        """,
        (7,),
        """\
        import torch

        def segment_angles(points):
            dx = points[1:, 0] - points[:-1, 0]
            dy = points[1:, 1] - points[:-1, 1]
            slope = dy / dx
            return torch.atan2(dy, dx)
        """,
    ),
    Flagged(  # method form on a ratio of columns
        """\
        import torch

        class Orientation(torch.nn.Module):
            def forward(self, offsets):
                return (offsets[:, 1] / offsets[:, 0]).atan()
        """,
        (5,),
        """\
        import torch

        class Orientation(torch.nn.Module):
            def forward(self, offsets):
                return torch.atan2(offsets[:, 1], offsets[:, 0])
        """,
    ),
    Flagged(  # sin / cos of a predicted angle
        """\
        import torch

        def decode_yaw(pred):
            sin_yaw, cos_yaw = pred[:, 6], pred[:, 7]
            return torch.atan(sin_yaw / cos_yaw)
        """,
        (5,),
        """\
        import torch

        def decode_yaw(pred):
            sin_yaw, cos_yaw = pred[:, 6], pred[:, 7]
            return torch.atan2(sin_yaw, cos_yaw)
        """,
    ),
    Flagged(  # the phase of a complex number by hand
        """\
        import torch

        def phase(spec_real, spec_imag):
            return torch.atan(spec_imag / spec_real)
        """,
        (4,),
        """\
        import torch

        def phase(spec_real, spec_imag):
            return torch.atan2(spec_imag, spec_real)
        """,
    ),
    Flagged(  # attributes named for components, torch.div
        """\
        import torch

        def flow_angle(flow):
            return torch.atan(torch.div(flow.v, flow.u))
        """,
        (4,),
        """\
        import torch

        def flow_angle(flow):
            return torch.atan2(flow.v, flow.u)
        """,
    ),
    Flagged(  # an alias import
        """\
        from torch import atan

        def bearing(delta_y, delta_x):
            return atan(delta_y / delta_x)
        """,
        (4,),
        """\
        from torch import atan
        import torch

        def bearing(delta_y, delta_x):
            return torch.atan2(delta_y, delta_x)
        """,
    ),
    Flagged(  # a ratio of two unknown values: strict mode only
        """\
        import torch

        def squash(a, b):
            return torch.atan(a / b)
        """,
        (4,),
        """\
        import torch

        def squash(a, b):
            return torch.atan2(a, b)
        """,
        strict=True,
        message="strict mode",
    ),
]

TNL210_SILENT = [
    Silent("import torch\ndef f(v):\n    return torch.atan2(v[..., 1], v[..., 0])\n"),
    Silent("import math\nimport torch\ndef f(focal, width):\n    return 2 * math.atan(width / (2 * focal))\n"),
    Silent("import torch\ndef f(sigma):\n    return torch.atan(sigma / 0.5)\n"),
    Silent("import torch\ndef f(x):\n    return torch.atan(x)\n"),
    Silent(  # an aspect ratio of box sides (the CIoU term): a ratio of positive sizes, not a vector
        "import torch\ndef ciou_v(w_gt, h_gt, w_pred, h_pred):\n"
        "    return torch.pow(torch.atan(w_gt / h_gt) - torch.atan(w_pred / h_pred), 2)\n"
    ),
    Silent(  # a guarded denominator
        "import torch\ndef f(dy, dx, eps=1e-6):\n    return torch.atan(dy / (dx + eps))\n"
    ),
    Silent(  # the same component twice is no vector
        "import torch\ndef f(v):\n    return torch.atan(v[..., 0] / v[..., 0].abs().max())\n"
    ),
    Silent(  # numpy
        "import numpy as np\nimport torch\ndef f(y, x):\n    return np.arctan(y / x)\n"
    ),
    Silent(  # a root of a ratio (kornia's fisheye), no vector components
        "import torch\ndef f(c2):\n    return c2.sqrt().atan()\n"
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL210", TNL210_FLAGGED, TNL210_SILENT))
def test_atan_of_ratio(code, case):
    harness.check(code, case)
