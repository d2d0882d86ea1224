"""TNL205 pairwise-distance-manual: distance matrices by broadcasting, rewritten as `cdist`; the
look-alikes left alone, and TNL204 leaving the site to TNL205."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

_MODE = 'compute_mode="donot_use_mm_for_euclid_dist"'

TNL205_FLAGGED = [
    Flagged(  # a repulsion loss over a point cloud
        """\
        import torch

        def repulsion_loss(points):
            d = torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
            return torch.exp(-d).mean()
        """,
        (4,),
        f"""\
        import torch

        def repulsion_loss(points):
            d = torch.cdist(points, points, {_MODE})
            return torch.exp(-d).mean()
        """,
        message="diagonal",
    ),
    Flagged(  # unsqueeze, pow, method sqrt
        """\
        import torch

        class Spread(torch.nn.Module):
            def forward(self, z):
                dist = (z.unsqueeze(1) - z.unsqueeze(0)).pow(2).sum(dim=-1).sqrt()
                return -dist.mean()
        """,
        (5,),
        f"""\
        import torch

        class Spread(torch.nn.Module):
            def forward(self, z):
                dist = torch.cdist(z, z, {_MODE})
                return -dist.mean()
        """,
    ),
    Flagged(  # explicit trailing axes, ** 0.5, keepdim=False, dim=2
        """\
        import torch

        def uniformity_loss(emb):
            d = (((emb[:, None, :] - emb[None, :, :]) ** 2).sum(dim=2, keepdim=False)) ** 0.5
            return torch.log(torch.exp(-2 * d).mean())
        """,
        (4,),
        f"""\
        import torch

        def uniformity_loss(emb):
            d = torch.cdist(emb, emb, {_MODE})
            return torch.log(torch.exp(-2 * d).mean())
        """,
    ),
    Flagged(  # batched point sets
        """\
        import torch

        def chamfer_loss(pts):
            d = torch.sqrt(((pts[:, :, None] - pts[:, None]) ** 2).sum(-1))
            return d.min(-1).values.mean()
        """,
        (4,),
        f"""\
        import torch

        def chamfer_loss(pts):
            d = torch.cdist(pts, pts, {_MODE})
            return d.min(-1).values.mean()
        """,
    ),
    Flagged(  # through a named difference and the square by multiplication
        """\
        import torch

        def energy_loss(x):
            diff = x[:, None] - x[None]
            dist = torch.sqrt((diff * diff).sum(-1))
            return dist.mean()
        """,
        (5,),
        f"""\
        import torch

        def energy_loss(x):
            diff = x[:, None] - x[None]
            dist = torch.cdist(x, x, {_MODE})
            return dist.mean()
        """,
    ),
    Flagged(  # the rows' order reversed: the matrix pairs the second operand's rows first
        """\
        import torch

        def graph_loss(h):
            d = torch.sqrt(((h[None] - h[:, None]) ** 2).sum(-1))
            return d.mean()
        """,
        (4,),
        f"""\
        import torch

        def graph_loss(h):
            d = torch.cdist(h, h, {_MODE})
            return d.mean()
        """,
    ),
    Flagged(  # negative axes of unsqueeze (any batch shape), under a torch alias
        """\
        import torch as th

        def knn_loss(feats):
            d = th.sqrt(((feats.unsqueeze(-2) - feats.unsqueeze(-3)) ** 2).sum(-1))
            return d.topk(4, largest=False).values.mean()
        """,
        (4,),
        f"""\
        import torch as th

        def knn_loss(feats):
            d = th.cdist(feats, feats, {_MODE})
            return d.topk(4, largest=False).values.mean()
        """,
    ),
    Flagged(  # two tensors: reported in strict mode only
        """\
        import torch

        def matching_loss(a, b):
            d = torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))
            return d.min(1).values.mean()
        """,
        (4,),
        f"""\
        import torch

        def matching_loss(a, b):
            d = torch.cdist(a, b, {_MODE})
            return d.min(1).values.mean()
        """,
        strict=True,
        message="strict mode",
    ),
]

TNL205_SILENT = [
    Silent(  # cdist already
        "import torch\ndef loss(x):\n    return torch.cdist(x, x).mean()\n"
    ),
    Silent(  # guarded inside the root
        "import torch\ndef loss(x, eps=1e-12):\n    return torch.sqrt(((x[:, None] - x[None]) ** 2).sum(-1) + eps).mean()\n"
    ),
    Silent(  # the norm of the difference: subgradient 0 at 0
        "import torch\ndef loss(x):\n    return (x[:, None] - x[None]).norm(dim=-1).mean()\n"
    ),
    Silent(  # squared distances, no root
        "import torch\ndef loss(x):\n    return ((x[:, None] - x[None]) ** 2).sum(-1).mean()\n"
    ),
    Silent(  # two tensors, not strict
        "import torch\ndef loss(a, b):\n    return torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1)).mean()\n"
    ),
    Silent(  # no gradient
        "import torch\n@torch.no_grad()\ndef knn(x):\n    return torch.sqrt(((x[:, None] - x[None]) ** 2).sum(-1)).topk(3).indices\n"
    ),
    Silent(  # summed over the points, not the coordinates: no distance matrix
        "import torch\ndef loss(x):\n    return torch.sqrt(((x[:, None] - x[None]) ** 2).sum(0)).mean()\n"
    ),
    Silent(  # keepdim: not cdist's shape
        "import torch\ndef loss(x):\n    return torch.sqrt(((x[:, None] - x[None]) ** 2).sum(-1, keepdim=True)).mean()\n"
    ),
    Silent(  # a difference along one tensor's own axis (consecutive points), not pairwise
        "import torch\ndef loss(x):\n    return torch.sqrt(((x[1:] - x[:-1]) ** 2).sum(-1) + 1e-8).mean()\n"
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL205", TNL205_FLAGGED, TNL205_SILENT))
def test_pairwise_distance_manual(code, case):
    harness.check(code, case)


def test_the_norm_rule_leaves_a_distance_matrix_to_tnl205():
    source = "import torch\ndef loss(x):\n    return torch.sqrt(((x[:, None] - x[None]) ** 2).sum(-1)).mean()\n"
    assert [f.code for f in harness.findings("TNL205", source, together=("TNL204", "TNL206"))] == ["TNL205"]
    assert [f.code for f in harness.findings("TNL204", source)] == ["TNL204"]
