"""TNL305 fp16-overflow-constant: a fill constant beyond 65504 on a float16 tensor in fp16 code."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL305"

FLAGGED = [
    # a module reached from an fp16 loop: scores of a linear layer, filled in place; TNL301 leaves it
    Flagged(
        """\
        import torch
        from torch import nn


        class Pointer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.query = nn.Linear(dim, dim)

            def forward(self, h, keys, pad):
                scores = torch.bmm(self.query(h), keys.transpose(1, 2))
                scores.masked_fill_(pad, -1e9)
                return scores.log_softmax(dim=-1)


        def fit(loader, dim):
            model = Pointer(dim)
            for h, keys, pad, target in loader:
                with torch.autocast("cuda"):
                    loss = torch.nn.functional.nll_loss(model(h, keys, pad).flatten(0, 1), target.flatten())
                loss.backward()
        """,
        lines=(12,),
        fixed="""\
        import torch
        from torch import nn


        class Pointer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.query = nn.Linear(dim, dim)

            def forward(self, h, keys, pad):
                scores = torch.bmm(self.query(h), keys.transpose(1, 2))
                scores.masked_fill_(pad, torch.finfo(scores.dtype).min)
                return scores.log_softmax(dim=-1)


        def fit(loader, dim):
            model = Pointer(dim)
            for h, keys, pad, target in loader:
                with torch.autocast("cuda"):
                    loss = torch.nn.functional.nll_loss(model(h, keys, pad).flatten(0, 1), target.flatten())
                loss.backward()
        """,
        together=("TNL301",),
        message="example.py:19",
        safe=False,  # in place: where the filled scores go is not followed (unsafe, to be sure)
    ),
    # float32's minimum through a module-level name, a .half() model's tensor, not before a softmax:
    # the fix changes the filled value itself (unsafe)
    Flagged(
        """\
        import torch

        NEG = torch.finfo(torch.float32).min


        @torch.autocast("cuda")
        def pool(feats, valid):
            x = feats.half()
            return x.masked_fill(~valid, NEG).amax(dim=1)
        """,
        lines=(9,),
        fixed="""\
        import torch

        NEG = torch.finfo(torch.float32).min


        @torch.autocast("cuda")
        def pool(feats, valid):
            x = feats.half()
            return x.masked_fill(~valid, torch.finfo(x.dtype).min).amax(dim=1)
        """,
        safe=False,
    ),
]

SILENT = [
    # a float32 island
    Silent(
        """\
        import torch


        def attend(q, k, mask):
            with torch.autocast("cuda"):
                with torch.autocast("cuda", enabled=False):
                    s = (q.float() @ k.float().transpose(-2, -1)).masked_fill(~mask, -1e9)
                    return s.softmax(-1)
        """
    ),
    # an input of unknown dtype (default mode)
    Silent(
        """\
        import torch


        def attend(scores, mask):
            with torch.autocast("cuda"):
                return scores.masked_fill(~mask, -1e9).softmax(-1)
        """
    ),
    # bfloat16 autocast holds -1e9
    Silent(
        """\
        import torch


        def attend(q, k, mask):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return (q @ k.transpose(-2, -1)).masked_fill(~mask, -1e9).softmax(-1)
        """
    ),
    # -inf is the masking rules' business; -1e4 fits
    Silent(
        """\
        import torch


        def attend(q, k, mask):
            with torch.autocast("cuda"):
                s = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
                return s.masked_fill(mask.all(-1, keepdim=True), -1e4).softmax(-1)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_fp16_overflow_constant(code, case):
    harness.check(code, case)
