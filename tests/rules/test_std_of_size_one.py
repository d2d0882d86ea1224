"""TNL212 std-of-size-one (off by default): a corrected std/var over the batch axis or a masked
selection; the `correction=0` fix; the look-alikes left alone."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

TNL212_FLAGGED = [
    Flagged(
        """\
        import torch

        def batch_norm_by_hand(x, eps=1e-5):
            return (x - x.mean(0)) / torch.sqrt(x.var(0) + eps)
        """,
        (4,),
        """\
        import torch

        def batch_norm_by_hand(x, eps=1e-5):
            return (x - x.mean(0)) / torch.sqrt(x.var(0, correction=0) + eps)
        """,
    ),
    Flagged(  # function form, dim keyword
        """\
        import torch

        def advantage_norm(adv):
            return (adv - adv.mean()) / (torch.std(adv, dim=0) + 1e-8)
        """,
        (4,),
        """\
        import torch

        def advantage_norm(adv):
            return (adv - adv.mean()) / (torch.std(adv, dim=0, correction=0) + 1e-8)
        """,
    ),
    Flagged(  # a masked selection
        """\
        import torch

        def positive_spread(scores, labels):
            pos = scores[labels == 1]
            return pos.std()
        """,
        (5,),
        """\
        import torch

        def positive_spread(scores, labels):
            pos = scores[labels == 1]
            return pos.std(correction=0)
        """,
    ),
    Flagged(  # keepdim kept
        """\
        import torch

        def whiten(feats):
            return feats / feats.std(dim=0, keepdim=True).clamp_min(1e-6)
        """,
        (4,),
        """\
        import torch

        def whiten(feats):
            return feats / feats.std(dim=0, keepdim=True, correction=0).clamp_min(1e-6)
        """,
    ),
    Flagged(  # masked_select
        """\
        import torch

        def valid_var(x, valid):
            return torch.var(x.masked_select(valid))
        """,
        (4,),
        """\
        import torch

        def valid_var(x, valid):
            return torch.var(x.masked_select(valid), correction=0)
        """,
    ),
    Flagged(  # a mask by name
        """\
        import torch

        def fg_std(depth, fg_mask):
            return depth[fg_mask].var()
        """,
        (4,),
        """\
        import torch

        def fg_std(depth, fg_mask):
            return depth[fg_mask].var(correction=0)
        """,
    ),
    Flagged(  # in a module's forward
        """\
        import torch

        class Stats(torch.nn.Module):
            def forward(self, h):
                return torch.cat([h.mean(0), h.std(0)])
        """,
        (5,),
        """\
        import torch

        class Stats(torch.nn.Module):
            def forward(self, h):
                return torch.cat([h.mean(0), h.std(0, correction=0)])
        """,
    ),
    Flagged(  # anything else in strict mode
        """\
        import torch

        def spread(x):
            return x.std(-1)
        """,
        (4,),
        """\
        import torch

        def spread(x):
            return x.std(-1, correction=0)
        """,
        strict=True,
        message="strict mode",
    ),
]

TNL212_SILENT = [
    Silent("import torch\ndef f(x):\n    return x.std(0, unbiased=False)\n"),
    Silent("import torch\ndef f(x):\n    return x.var(0, correction=0)\n"),
    Silent("import torch\ndef f(x):\n    return torch.std(x, dim=0, correction=1)\n"),
    Silent("import torch\ndef f(x):\n    return x.std(-1)\n"),
    Silent("import numpy as np\nimport torch\ndef f(x):\n    return np.std(x, axis=0)\n"),
    Silent("import torch\ndef f(x):\n    return x.var(dim=-1, keepdim=True)\n"),
    Silent("import statistics\nimport torch\ndef f(xs):\n    return statistics.stdev(xs)\n"),
    Silent("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return self.std(x)\n"),
]


@pytest.mark.parametrize("code, case", harness.params("TNL212", TNL212_FLAGGED, TNL212_SILENT))
def test_std_of_size_one(code, case):
    harness.check(code, case)
