"""TNL208 acos-asin-unclamped: acos/asin of cosines in the forms training code writes them, and
the look-alikes that keep the value inside (-1, 1) or never carry a gradient."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent

HEAD = "import torch\nimport torch.nn.functional as F\n\n\n"
EPS = "-1 + torch.finfo({v}.dtype).eps, 1 - torch.finfo({v}.dtype).eps"


def _clamped(v):
    return f"{v}.clamp({EPS.format(v=v)})"


def _case(body, line, fixed_body=None, **kw):
    """A module of HEAD + `body`; `line` counted in `body` (HEAD is 4 lines)."""
    fixed = HEAD + fixed_body if fixed_body is not None else None
    return Flagged(HEAD + body, (line + 4,), fixed=fixed, **kw)


ACOS_FLAGGED = [
    # the cosine similarity through a name, arccos spelled out
    _case(
        "def angular_error(pred, gt):\n    cos = F.cosine_similarity(pred, gt, dim=-1)\n    return torch.arccos(cos).mean()\n",
        3,
        f"def angular_error(pred, gt):\n    cos = F.cosine_similarity(pred, gt, dim=-1)\n    return torch.arccos({_clamped('cos')}).mean()\n",
        message="a cosine similarity",
    ),
    # the method forms
    _case(
        "def angle(a, b):\n    cos = F.cosine_similarity(a, b)\n    return cos.arccos()\n",
        3,
        f"def angle(a, b):\n    cos = F.cosine_similarity(a, b)\n    return {_clamped('cos')}.arccos()\n",
    ),
    _case(
        "def latitude(v, axis):\n    s = F.cosine_similarity(v, axis, dim=-1)\n    return s.asin()\n",
        3,
        f"def latitude(v, axis):\n    s = F.cosine_similarity(v, axis, dim=-1)\n    return {_clamped('s')}.asin()\n",
    ),
    # asin and arcsin in function form
    _case(
        "def elevation(d, up):\n    sin_el = torch.cosine_similarity(d, up, dim=1)\n    return torch.asin(sin_el)\n",
        3,
        f"def elevation(d, up):\n    sin_el = torch.cosine_similarity(d, up, dim=1)\n    return torch.asin({_clamped('sin_el')})\n",
    ),
    _case(
        "def elevation(d, up):\n    sin_el = torch.cosine_similarity(d, up, dim=1)\n    return torch.arcsin(sin_el)\n",
        3,
        f"def elevation(d, up):\n    sin_el = torch.cosine_similarity(d, up, dim=1)\n    return torch.arcsin({_clamped('sin_el')})\n",
    ),
    # inline: reported, no fix (the expression would be computed three times)
    _case("def angle_loss(a, b):\n    return torch.acos(F.cosine_similarity(a, b, dim=1)).mean()\n", 2),
    _case(
        "def angle_loss(a, b):\n    a_n = F.normalize(a, dim=-1)\n    b_n = F.normalize(b, dim=-1)\n"
        "    return torch.acos((a_n * b_n).sum(-1)).mean()\n",
        4,
        message="a dot product of unit vectors",
    ),
    # a matrix product of unit vectors, and einsum of rows divided by their norms
    _case(
        "def pairwise_angles(x, y):\n    xn = F.normalize(x, dim=1)\n    yn = F.normalize(y, dim=1)\n"
        "    sim = xn @ yn.T\n    return torch.acos(sim)\n",
        5,
        "def pairwise_angles(x, y):\n    xn = F.normalize(x, dim=1)\n    yn = F.normalize(y, dim=1)\n"
        f"    sim = xn @ yn.T\n    return torch.acos({_clamped('sim')})\n",
    ),
    _case(
        "def angles(u, v):\n    u = u / u.norm(dim=-1, keepdim=True)\n    v = v / v.norm(dim=-1, keepdim=True)\n"
        '    c = torch.einsum("bd,bd->b", u, v)\n    return torch.acos(c)\n',
        5,
        "def angles(u, v):\n    u = u / u.norm(dim=-1, keepdim=True)\n    v = v / v.norm(dim=-1, keepdim=True)\n"
        f'    c = torch.einsum("bd,bd->b", u, v)\n    return torch.acos({_clamped("c")})\n',
    ),
    # a dot product over the norms (TNL203's site; here its acos)
    _case(
        "def angle(a, b):\n    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))\n    return torch.acos(cos)\n",
        3,
        f"def angle(a, b):\n    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))\n    return torch.acos({_clamped('cos')})\n",
        message="a dot product over the norms",
    ),
    # a unit quaternion's scalar part, indexed and unbound
    _case(
        "def rotation_angle(q):\n    q = F.normalize(q, dim=-1)\n    return 2 * torch.acos(q[..., 0])\n",
        3,
        message="a component of a unit vector",
    ),
    _case(
        "def rotation_angle(q):\n    w, x, y, z = F.normalize(q, dim=-1).unbind(-1)\n    return 2 * torch.acos(w)\n",
        3,
        f"def rotation_angle(q):\n    w, x, y, z = F.normalize(q, dim=-1).unbind(-1)\n    return 2 * torch.acos({_clamped('w')})\n",
    ),
    # a rotation's angle from its trace: torch.trace inline, einsum through names
    # a rotation's angle of a matrix nothing shows to be a product or a prediction: strict mode only
    _case("def geodesic(R):\n    return torch.acos((torch.trace(R) - 1) / 2)\n", 2, strict=True, message="strict mode"),
    _case(
        'def geodesic(R1, R2):\n    tr = torch.einsum("bii->b", R1.transpose(1, 2) @ R2)\n    cos = 0.5 * (tr - 1)\n'
        "    return torch.acos(cos).mean()\n",
        4,
        'def geodesic(R1, R2):\n    tr = torch.einsum("bii->b", R1.transpose(1, 2) @ R2)\n    cos = 0.5 * (tr - 1)\n'
        f"    return torch.acos({_clamped('cos')}).mean()\n",
    ),
    # slerp of unit quaternions without the near-parallel fallback
    _case(
        "def slerp(q0, q1, t):\n    q0 = q0 / q0.norm(dim=-1, keepdim=True)\n    q1 = q1 / q1.norm(dim=-1, keepdim=True)\n"
        "    dot = torch.sum(q0 * q1, dim=-1, keepdim=True)\n    theta = torch.acos(dot)\n"
        "    return (torch.sin((1 - t) * theta) * q0 + torch.sin(t * theta) * q1) / torch.sin(theta)\n",
        5,
        "def slerp(q0, q1, t):\n    q0 = q0 / q0.norm(dim=-1, keepdim=True)\n    q1 = q1 / q1.norm(dim=-1, keepdim=True)\n"
        f"    dot = torch.sum(q0 * q1, dim=-1, keepdim=True)\n    theta = torch.acos({_clamped('dot')})\n"
        "    return (torch.sin((1 - t) * theta) * q0 + torch.sin(t * theta) * q1) / torch.sin(theta)\n",
    ),
    # torch.dot of two unit vectors, in a loss method of a module
    _case(
        "class DirectionLoss(torch.nn.Module):\n    def forward(self, d, g):\n"
        "        d = F.normalize(d, dim=0)\n        g = F.normalize(g, dim=0)\n        return torch.acos(torch.dot(d, g))\n",
        5,
    ),
    # strict mode: any acos of a tensor, and a clamp to exactly [-1, 1] (infinite gradient at the edge)
    _case(
        "def angle(c):\n    return torch.acos(c)\n",
        2,
        "def angle(c):\n    return torch.acos(" + _clamped("c") + ")\n",
        strict=True,
        message="strict mode",
    ),
    _case(
        "def angle(a, b):\n    cos = F.cosine_similarity(a, b).clamp(-1, 1)\n    return torch.acos(cos)\n",
        3,
        f"def angle(a, b):\n    cos = F.cosine_similarity(a, b).clamp(-1, 1)\n    return torch.acos({_clamped('cos')})\n",
        strict=True,
        message="clamped to exactly [-1, 1]",
    ),
]

ACOS_SILENT = [
    Silent(HEAD + body, strict=strict)
    for body, strict in [
        # clamped strictly inside, in every spelling
        ("def angle(a, b, eps=1e-7):\n    cos = F.cosine_similarity(a, b)\n    return torch.acos(cos.clamp(-1 + eps, 1 - eps))\n", True),
        ("def angle(a, b):\n    return torch.acos(torch.clamp(F.cosine_similarity(a, b), -0.9999999, 0.9999999))\n", True),
        ("def angle(a, b, eps):\n    return torch.acos(torch.clip(F.cosine_similarity(a, b), min=-1 + eps, max=1 - eps))\n", True),
        ("def angle(a, b):\n    cos = F.cosine_similarity(a, b).clamp(-1 + 1e-6, 1 - 1e-6)\n    return torch.acos(cos)\n", True),
        ("def angle(a, b):\n    return torch.acos(F.cosine_similarity(a, b) * 0.999999)\n", True),
        # a clamp to exactly [-1, 1]: finite forward; reported only in strict mode
        ("def angle(a, b):\n    cos = torch.clamp(F.cosine_similarity(a, b), -1.0, 1.0)\n    return torch.acos(cos)\n", False),
        # slerp with the near-parallel fallback: the author tests the edge
        (
            "def slerp(q0, q1, t):\n    dot = (F.normalize(q0, dim=0) * F.normalize(q1, dim=0)).sum()\n"
            "    if dot > 0.9995:\n        return torch.lerp(q0, q1, t)\n    theta = torch.acos(dot)\n"
            "    return theta\n",
            False,
        ),
        # diagnostics: no gradient, detached, read as a number
        ("@torch.no_grad()\ndef log_angles(a, b):\n    return torch.acos(F.cosine_similarity(a, b)).mean()\n", False),
        ("def log_angles(a, b):\n    cos = F.cosine_similarity(a, b).detach()\n    return torch.acos(cos)\n", False),
        ("def log_angles(a, b):\n    return torch.acos(F.cosine_similarity(a, b)).mean().item()\n", False),
        # Python floats and numpy arrays
        ("import math\nimport numpy as np\n\ndef angles(u, v):\n    return math.acos(0.5), np.arccos(np.dot(u, v))\n", True),
        # acos of a value with no sign of a cosine (reported only in strict mode)
        ("def angle(c):\n    return torch.acos(c)\n", False),
        ("def phase(x):\n    return torch.acos(torch.tanh(x))\n", False),
        # a cosine that is not acos'd, and an acos of an anchored constant
        ("def sim_loss(a, b):\n    return 1 - F.cosine_similarity(a, b).mean()\n", True),
        ("def half_turn():\n    return torch.acos(torch.tensor(-1.0 + 1e-6))\n", True),
        # a value clamped on one branch and the other: every way guarded
        (
            "def angle(a, b, tight):\n    c = F.cosine_similarity(a, b)\n"
            "    c = c.clamp(-0.999, 0.999) if tight else c.clamp(-1 + 1e-6, 1 - 1e-6)\n    return torch.acos(c)\n",
            True,
        ),
    ]
]


@pytest.mark.parametrize("code, case", harness.params("TNL208", ACOS_FLAGGED, ACOS_SILENT))
def test_acos_asin_unclamped(code, case):
    harness.check(code, case)


# The rotation form `(trace(R) - 1) / 2` by the evidence on R. One rotation built from cos/sin of
# an angle has trace 1 + 2 cos t: its cosine reaches +-1 and never passes it (measured over 200001
# angles in float16, bfloat16, float32, float64); a product of rotations passes it by rounding
# (measured: (trace(R1.T @ R1) - 1) / 2 > 1 for 27633 of 100000 random float32 rotations).

_EXACT_ROTATIONS = HEAD + (
    "def rotation_about_z(angle):\n"
    "    c, s = torch.cos(angle), torch.sin(angle)\n"
    "    one, zero = torch.ones_like(c), torch.zeros_like(c)\n"
    "    return torch.stack((c, -s, zero, s, c, zero, zero, zero, one), dim=-1).view(-1, 3, 3)\n"
    "\n"
    "\n"
    "def unsigned_angle(rot):\n"
    "    tr = torch.diagonal(rot, dim1=-2, dim2=-1).sum(-1)\n"
    "    return torch.acos((tr - 1.0) / 2.0)\n"
    "\n"
    "\n"
    "def test_angle_round_trip():\n"
    "    angle = torch.rand(16) * 3.14159\n"
    "    rot = torch.stack((torch.cos(angle), -torch.sin(angle), torch.zeros(16), torch.sin(angle), torch.cos(angle),\n"
    "                       torch.zeros(16), torch.zeros(16), torch.zeros(16), torch.ones(16)), dim=-1).view(-1, 3, 3)\n"
    "    assert torch.allclose(unsigned_angle(rot), angle, atol=1e-5)\n"
)

_HEAD_NN = HEAD + "from torch import nn\n\n\n"

_POSE_HEAD = _HEAD_NN + (
    "class PoseHead(nn.Module):\n"
    "    def __init__(self, dim):\n"
    "        super().__init__()\n"
    "        self.to_rot = nn.Linear(dim, 9)\n"
    "\n"
    "    def forward(self, feats, rot_gt):\n"
    "        rot = self.to_rot(feats).view(-1, 3, 3)\n"
    "        cos = (rot.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2\n"
    "        return torch.acos(cos).mean()\n"
)

_YAW_LOSS = _HEAD_NN + (
    "class YawLoss(nn.Module):\n"
    "    def forward(self, yaw_pred):\n"
    "        c, s = torch.cos(yaw_pred), torch.sin(yaw_pred)\n"
    "        one, zero = torch.ones_like(c), torch.zeros_like(c)\n"
    "        rot = torch.stack((c, -s, zero, s, c, zero, zero, zero, one), dim=-1).view(-1, 3, 3)\n"
    "        return torch.acos(0.5 * (torch.einsum('bii->b', rot) - 1)).mean()\n"
)

ROTATION_FLAGGED = [
    # a predicted matrix (a linear layer's output) in a module
    Flagged(
        _POSE_HEAD,
        (16,),
        fixed=_POSE_HEAD.replace("torch.acos(cos)", f"torch.acos({_clamped('cos')})"),
        message="the output of `self.to_rot`",
    ),
    # one exact rotation of a predicted angle: finite, but the gradient through the acos is infinite at +-1
    Flagged(_YAW_LOSS, (13,), message="a gradient flows through"),
    # exact rotations passed by the only caller: reported in strict mode, saying why
    Flagged(_EXACT_ROTATIONS, (13,), strict=True, message="not shown to be a product or a prediction"),
]

ROTATION_SILENT = [
    # the only caller passes one rotation built from cos/sin of given angles (a test's round trip)
    Silent(_EXACT_ROTATIONS),
]

_ANGLE_METRIC = HEAD + ("def rotation_angle(rot):\n    cos = (torch.einsum('...ii->...', rot) - 1) / 2\n    return torch.acos(cos)\n")

ROTATION_PROJECTS = [
    # a relative rotation passed by a caller in another file: the caller is named
    Project(
        files={
            "geometry/metrics.py": _ANGLE_METRIC,
            "train_pose.py": (
                "from geometry.metrics import rotation_angle\n"
                "\n"
                "\n"
                "def pose_loss(rot_pred, rot_gt):\n"
                "    err = rotation_angle(rot_pred @ rot_gt.transpose(-1, -2))\n"
                "    return err.mean()\n"
            ),
        },
        lines={"geometry/metrics.py": (7,)},
        fixed={"geometry/metrics.py": _ANGLE_METRIC.replace("torch.acos(cos)", f"torch.acos({_clamped('cos')})")},
        message="passed as `rot` by the call at train_pose.py:5",
    ),
    # callers that pass one exactly built rotation each: silent by default
    Project(
        files={
            "geometry/metrics.py": _ANGLE_METRIC,
            "tests/test_metrics.py": (
                "import math\n"
                "import torch\n"
                "from geometry.metrics import rotation_angle\n"
                "\n"
                "\n"
                "def test_quarter_turn():\n"
                "    t = torch.tensor(math.pi / 2)\n"
                "    rot = torch.stack([torch.stack([torch.cos(t), -torch.sin(t), torch.tensor(0.0)]),\n"
                "                       torch.stack([torch.sin(t), torch.cos(t), torch.tensor(0.0)]),\n"
                "                       torch.tensor([0.0, 0.0, 1.0])])\n"
                "    got = rotation_angle(rot)\n"
                "    assert torch.isclose(got, t)\n"
            ),
        },
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL208", ROTATION_FLAGGED, ROTATION_SILENT, ROTATION_PROJECTS))
def test_rotation_angle_evidence(code, case):
    harness.check(code, case)
