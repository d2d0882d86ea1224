"""TNL308 attention-scaled-after-matmul: flagged forms (inline, through the scores' name, function
and method matmuls, einsum, a module an fp16 loop reaches) and look-alikes (scaled first, SDPA,
islands, bfloat16, cosine attention, no softmax, a sharpening factor, no fp16 region)."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL308"

FLAGGED = [
    # inline, scale from the shape, autocast in the function
    Flagged(
        """\
        import torch


        def attend(q, k, v):
            with torch.autocast("cuda"):
                scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
                return scores.softmax(-1) @ v
        """,
        lines=(6,),
        fixed="""\
        import torch


        def attend(q, k, v):
            with torch.autocast("cuda"):
                scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
                return scores.softmax(-1) @ v
        """,
        message="example.py:5",
    ),
    # divided by math.sqrt(d) inside torch.matmul, through a mask and F.softmax
    Flagged(
        """\
        import math

        import torch
        import torch.nn.functional as F


        def attend(q, k, v, mask, head_dim: int):
            with torch.autocast("cuda"):
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_dim)
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
                return torch.matmul(F.softmax(scores, dim=-1), v)
        """,
        lines=(9,),
        fixed="""\
        import math

        import torch
        import torch.nn.functional as F


        def attend(q, k, v, mask, head_dim: int):
            with torch.autocast("cuda"):
                scores = torch.matmul(q / math.sqrt(head_dim), k.transpose(-1, -2))
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
                return torch.matmul(F.softmax(scores, dim=-1), v)
        """,
    ),
    # a module's scale set in __init__, the scale on the left, bmm, a relative-position bias, and an
    # fp16 loop in the same file reaching the forward
    Flagged(
        """\
        import torch
        from torch import nn


        class Attention(nn.Module):
            def __init__(self, dim, heads=8, qk_scale=None):
                super().__init__()
                head_dim = dim // heads
                self.scale = qk_scale or head_dim ** -0.5
                self.qkv = nn.Linear(dim, dim * 3)
                self.bias = nn.Parameter(torch.zeros(heads, 1, 1))

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                attn = self.scale * torch.bmm(q, k.transpose(1, 2))
                attn = attn + self.bias
                return torch.bmm(attn.softmax(dim=-1), v)


        def fit(loader, dim):
            model = Attention(dim)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = model(x).square().mean()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        """,
        lines=(15,),
        fixed="""\
        import torch
        from torch import nn


        class Attention(nn.Module):
            def __init__(self, dim, heads=8, qk_scale=None):
                super().__init__()
                head_dim = dim // heads
                self.scale = qk_scale or head_dim ** -0.5
                self.qkv = nn.Linear(dim, dim * 3)
                self.bias = nn.Parameter(torch.zeros(heads, 1, 1))

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                attn = torch.bmm(q * self.scale, k.transpose(1, 2))
                attn = attn + self.bias
                return torch.bmm(attn.softmax(dim=-1), v)


        def fit(loader, dim):
            model = Attention(dim)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = model(x).square().mean()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        """,
        message="example.py:25",
    ),
    # einsum, scaled in the next statement: reported there, no fix (two statements)
    Flagged(
        """\
        import torch


        @torch.autocast("cuda")
        def attend(q, k, v, temperature: float):
            sim = torch.einsum("bhid,bhjd->bhij", q, k)
            sim = sim / temperature
            return torch.einsum("bhij,bhjd->bhid", sim.softmax(dim=-1), v)
        """,
        lines=(7,),
    ),
    # an nn.Softmax attribute, a learned temperature that may be a tensor: reported, no fix
    Flagged(
        """\
        import torch
        from torch import nn


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.softmax = nn.Softmax(dim=-1)
                self.temperature = nn.Parameter(torch.ones(1))

            def forward(self, q, k):
                with torch.cuda.amp.autocast():
                    return self.softmax(q @ k.mT / self.temperature)
        """,
        lines=(13,),
    ),
    # no fp16 region known: strict mode only, and it says so
    Flagged(
        """\
        import torch


        def attend(q, k, v):
            scores = (q @ k.transpose(-2, -1)) * 0.125
            return scores.softmax(-1) @ v
        """,
        lines=(5,),
        fixed="""\
        import torch


        def attend(q, k, v):
            scores = (q * 0.125) @ k.transpose(-2, -1)
            return scores.softmax(-1) @ v
        """,
        strict=True,
        message="strict mode",
    ),
]

SILENT = [
    # the scale moved onto q already
    Silent(
        """\
        import torch


        def attend(q, k, v):
            with torch.autocast("cuda"):
                q = q * q.shape[-1] ** -0.5
                return (q @ k.transpose(-2, -1)).softmax(-1) @ v
        """
    ),
    # F.scaled_dot_product_attention
    Silent(
        """\
        import torch
        import torch.nn.functional as F


        def attend(q, k, v):
            with torch.autocast("cuda"):
                return F.scaled_dot_product_attention(q, k, v)
        """
    ),
    # a float32 island inside the fp16 region
    Silent(
        """\
        import torch


        def attend(q, k, v):
            with torch.autocast("cuda"):
                with torch.autocast("cuda", enabled=False):
                    scores = (q.float() @ k.float().transpose(-2, -1)) / 8.0
                    return scores.softmax(-1) @ v.float()
        """
    ),
    # bfloat16: float32's range
    Silent(
        """\
        import torch


        def attend(q, k, v):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return ((q @ k.transpose(-2, -1)) * 0.125).softmax(-1) @ v
        """
    ),
    # cosine attention: normalised q and k
    Silent(
        """\
        import torch
        import torch.nn.functional as F


        def attend(q, k, v, logit_scale):
            with torch.autocast("cuda"):
                q = F.normalize(q, dim=-1)
                k = F.normalize(k, dim=-1)
                attn = (q @ k.transpose(-2, -1)) * logit_scale
                return attn.softmax(-1) @ v
        """
    ),
    # not attention: the scaled product is a similarity matrix for a loss, no softmax
    Silent(
        """\
        import torch
        import torch.nn.functional as F


        def contrastive(a, b, labels):
            with torch.autocast("cuda"):
                logits = (a @ b.T) * 0.07
                return F.cross_entropy(logits, labels)
        """
    ),
    # a factor above 1: moving it changes nothing about the overflow
    Silent(
        """\
        import torch


        def attend(q, k, v):
            with torch.autocast("cuda"):
                return ((q @ k.transpose(-2, -1)) * 4).softmax(-1) @ v
        """
    ),
    # a product of two masks, not a scale
    Silent(
        """\
        import torch


        def attend(q, k, v, keep):
            with torch.autocast("cuda"):
                scores = (q @ k.transpose(-2, -1)) * keep
                return scores.softmax(-1) @ v
        """
    ),
    # attention probabilities times v, scaled after: the softmax comes first
    Silent(
        """\
        import torch


        def attend(scores, v):
            with torch.autocast("cuda"):
                return (scores.softmax(-1) @ v) * 0.5
        """
    ),
    # no fp16 region reaches it (default mode)
    Silent(
        """\
        import torch


        def attend(q, k, v):
            scores = (q @ k.transpose(-2, -1)) * 0.125
            return scores.softmax(-1) @ v
        """
    ),
    # a module only ever run in float32
    Silent(
        """\
        import torch
        from torch import nn


        class Attention(nn.Module):
            def forward(self, q, k, v):
                return ((q @ k.transpose(-2, -1)) / 8).softmax(-1) @ v


        def run(q, k, v):
            return Attention()(q, k, v)
        """
    ),
    # the hand-written branch beside F.scaled_dot_product_attention runs only on a torch without it
    Silent(
        """\
        import torch
        import torch.nn.functional as F


        def attend(q, k, v, flash):
            with torch.autocast("cuda"):
                if flash:
                    return F.scaled_dot_product_attention(q, k, v)
                att = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)
                return att.softmax(dim=-1) @ v


        def attend_else(q, k, v, has_sdp):
            with torch.autocast("cuda"):
                if has_sdp:
                    out = F.scaled_dot_product_attention(q, k, v)
                else:
                    s = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5
                    out = s.softmax(-1) @ v
                return out
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_attention_scaled_after_matmul(code, case):
    harness.check(code, case)
