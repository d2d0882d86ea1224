"""TNL401 masked-inf-softmax and TNL402 label-smoothing-inf-logits: the -inf fills caught (in a
forward, a helper, a training step; in place, through `.data`, index assignment, additive masks,
constants and attributes) with exact fixes, and the look-alikes left alone (causal masks,
re-zeroed outputs, finite fills, fills that never reach a softmax)."""

from dataclasses import replace

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

TNL401_FLAGGED = [
    # in a forward, method form, inline
    Flagged(
        """\
        import torch
        from torch import nn

        class Attention(nn.Module):
            def forward(self, q, k, v, mask):
                scores = q @ k.transpose(-2, -1)
                scores = scores.masked_fill(mask == 0, float("-inf"))
                attn = scores.softmax(dim=-1)
                return attn @ v
        """,
        (7,),
        """\
        import torch
        from torch import nn

        class Attention(nn.Module):
            def forward(self, q, k, v, mask):
                scores = q @ k.transpose(-2, -1)
                scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
                attn = scores.softmax(dim=-1)
                return attn @ v
        """,
    ),
    # in place, F alias, -math.inf
    Flagged(
        """\
        import math
        import torch
        import torch.nn.functional as F

        def attention(q, k, key_padding_mask):
            w = torch.bmm(q, k.transpose(1, 2))
            w.masked_fill_(key_padding_mask.unsqueeze(1), -math.inf)
            return F.softmax(w, dim=-1)
        """,
        (7,),
        """\
        import math
        import torch
        import torch.nn.functional as F

        def attention(q, k, key_padding_mask):
            w = torch.bmm(q, k.transpose(1, 2))
            w.masked_fill_(key_padding_mask.unsqueeze(1), torch.finfo(w.dtype).min)
            return F.softmax(w, dim=-1)
        """,
    ),
    # through .data, -torch.inf, torch.softmax
    Flagged(
        """\
        import torch

        def pointer_scores(logits, visited):
            logits.data.masked_fill_(visited, -torch.inf)
            return torch.softmax(logits, dim=1)
        """,
        (4,),
        """\
        import torch

        def pointer_scores(logits, visited):
            logits.data.masked_fill_(visited, torch.finfo(logits.dtype).min)
            return torch.softmax(logits, dim=1)
        """,
    ),
    # a module constant, log_softmax in a training step
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        NEG_INF = float("-inf")

        def train_step(model, batch, opt):
            logits = model(batch["x"])
            logits = logits.masked_fill(~batch["allowed"], NEG_INF)
            loss = -F.log_softmax(logits, -1).gather(1, batch["y"][:, None]).mean()
            loss.backward()
            opt.step()
        """,
        (8,),
        """\
        import torch
        import torch.nn.functional as F

        NEG_INF = float("-inf")

        def train_step(model, batch, opt):
            logits = model(batch["x"])
            logits = logits.masked_fill(~batch["allowed"], torch.finfo(logits.dtype).min)
            loss = -F.log_softmax(logits, -1).gather(1, batch["y"][:, None]).mean()
            loss.backward()
            opt.step()
        """,
    ),
    # the fill value held in an attribute, an nn.Softmax module
    Flagged(
        """\
        import torch
        from torch import nn

        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.neg_inf = -float("inf")
                self.softmax = nn.Softmax(dim=1)

            def forward(self, h, lengths_mask):
                e = self.score(h).squeeze(-1)
                e = e.masked_fill(~lengths_mask, self.neg_inf)
                return (self.softmax(e).unsqueeze(-1) * h).sum(1)
        """,
        (12,),
        """\
        import torch
        from torch import nn

        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.neg_inf = -float("inf")
                self.softmax = nn.Softmax(dim=1)

            def forward(self, h, lengths_mask):
                e = self.score(h).squeeze(-1)
                e = e.masked_fill(~lengths_mask, torch.finfo(e.dtype).min)
                return (self.softmax(e).unsqueeze(-1) * h).sum(1)
        """,
    ),
    # index assignment in a helper
    Flagged(
        """\
        import torch

        def masked_probs(scores, invalid):
            scores[invalid] = float("-inf")
            return scores.softmax(-1)
        """,
        (4,),
        """\
        import torch

        def masked_probs(scores, invalid):
            scores[invalid] = torch.finfo(scores.dtype).min
            return scores.softmax(-1)
        """,
    ),
    # an additive mask from torch.full, added with +=: reported, no fix
    Flagged(
        """\
        import torch

        def attend(q, k, pad):
            bias = torch.full(pad.shape, float("-inf"), device=q.device)
            bias = bias * pad
            s = q @ k.T
            add = torch.full((q.size(0), k.size(0)), float("-inf"))
            s += add
            return s.softmax(-1)
        """,
        (7,),
    ),
    # torch.where with -inf, through a name
    Flagged(
        """\
        import torch

        def select(logits, legal):
            masked = torch.where(legal, logits, float("-inf"))
            probs = masked.softmax(dim=-1)
            return probs
        """,
        (4,),
        """\
        import torch

        def select(logits, legal):
            masked = torch.where(legal, logits, torch.finfo(logits.dtype).min)
            probs = masked.softmax(dim=-1)
            return probs
        """,
    ),
    # re-zeroed after an additive mask in a forward: the gradient is still NaN
    Flagged(
        """\
        import torch
        from torch import nn

        class Attn(nn.Module):
            def forward(self, s, pad):
                bias = torch.zeros_like(s).masked_fill(pad, float("-inf"))
                p = (s + bias).softmax(-1)
                p = p.masked_fill(pad, 0.0)
                return p
        """,
        (6,),
        message="gradient of the scores",
    ),
    # multiplying by the keep-mask does not re-zero a NaN
    Flagged(
        """\
        import torch

        def attend(s, pad):
            p = s.masked_fill(pad, float("-inf")).softmax(-1)
            return p * (~pad).float()
        """,
        (4,),
        """\
        import torch

        def attend(s, pad):
            p = s.masked_fill(pad, torch.finfo(s.dtype).min).softmax(-1)
            return p * (~pad).float()
        """,
    ),
    # a comparison against a constant, not against the row's own ranking, can cover a row
    Flagged(
        """\
        import torch

        def gate(logits):
            logits[logits < 0] = float("-inf")
            return logits.softmax(-1)
        """,
        (4,),
        """\
        import torch

        def gate(logits):
            logits[logits < 0] = torch.finfo(logits.dtype).min
            return logits.softmax(-1)
        """,
    ),
    # a triu with the diagonal included is no causal mask (row 0 is fully masked)
    Flagged(
        """\
        import torch

        def attend(s):
            m = torch.triu(torch.ones(s.size(-1), s.size(-1), dtype=torch.bool))
            return s.masked_fill(m, float("-inf")).softmax(-1)
        """,
        (5,),
        """\
        import torch

        def attend(s):
            m = torch.triu(torch.ones(s.size(-1), s.size(-1), dtype=torch.bool))
            return s.masked_fill(m, torch.finfo(s.dtype).min).softmax(-1)
        """,
    ),
]

TNL401_SILENT = [
    # finfo of the scores' dtype, and a large finite fill (another rule's)
    Silent(
        """\
        import torch

        def attend(s, m):
            a = s.masked_fill(m, torch.finfo(s.dtype).min).softmax(-1)
            b = s.masked_fill(m, -10000).softmax(-1)
            c = s.masked_fill(m, -1e9).softmax(-1)
            return a + b + c
        """
    ),
    # strictly causal: triu(ones, diagonal=1)
    Silent(
        """\
        import torch

        def causal(s):
            n = s.size(-1)
            future = torch.triu(torch.ones(n, n), diagonal=1).bool()
            return s.masked_fill(future, float("-inf")).softmax(-1)
        """
    ),
    # nanoGPT: a tril buffer read as == 0
    Silent(
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class CausalSelfAttention(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

            def forward(self, q, k, v):
                T = q.size(-2)
                att = q @ k.transpose(-2, -1)
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                return att @ v
        """
    ),
    # LLaMA: an additive triu(full(-inf), diagonal=start_pos + 1)
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def forward(h, start_pos, seqlen, scores):
            mask = torch.full((seqlen, seqlen), float("-inf"), device=h.device)
            mask = torch.triu(mask, diagonal=start_pos + 1)
            scores = scores + mask
            return F.softmax(scores.float(), dim=-1)
        """
    ),
    # re-zeroed after a masked_fill: finite forward and gradient
    Silent(
        """\
        import torch

        def attend(s, pad):
            p = s.masked_fill(pad, float("-inf")).softmax(-1)
            p = p.masked_fill(pad, 0.0)
            q = torch.where(pad, 0.0, s.masked_fill(pad, float("-inf")).softmax(-1))
            return p + q
        """
    ),
    # scaled_dot_product_attention with a mask; no softmax written
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def attend(q, k, v, pad):
            bias = torch.zeros(pad.shape).masked_fill(pad, float("-inf"))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        """
    ),
    # max-pooling with -inf padding: never reaches a softmax
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def pool(x, m, s):
            p = F.pad(x, (1, 1), value=float("-inf"))
            y = x.masked_fill(m, float("-inf")).amax(-1)
            return F.max_pool1d(p, 3, 1), y, s.softmax(-1)
        """
    ),
    # the filled name rebound before the softmax
    Silent(
        """\
        import torch

        def f(s, m, t):
            s = s.masked_fill(m, float("-inf"))
            best = s.argmax(-1)
            s = t * 2
            return s.softmax(-1), best
        """
    ),
    # a positive infinity, and a fill on another tensor than the softmax's
    Silent(
        """\
        import torch

        def f(s, d, m):
            d = d.masked_fill(m, float("inf"))
            nearest = d.min(-1).values
            e = s.masked_fill(m, float("-inf"))
            return torch.softmax(s, -1), nearest, e.max()
        """
    ),
    # top-k filtering in generation (nanoGPT): the top k of each row stay
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def sample(logits, top_k):
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
            kth = logits.topk(top_k).values[..., -1, None]
            logits = logits.masked_fill(logits < kth, float("-inf"))
            return F.softmax(logits, dim=-1)
        """
    ),
    # suppressed vocabulary columns (speechbrain's Whisper decoder): never a whole row
    Silent(
        """\
        import numpy as np
        import torch

        def language_probs(logits, language_tokens, suppress):
            mask = torch.ones(logits.shape[-1], dtype=torch.bool)
            mask[language_tokens] = False
            logits[:, mask] = -np.inf
            logits[:, list(suppress)] = -torch.inf
            return logits.log_softmax(dim=-1)
        """
    ),
    # a causal where: tril kept, -inf elsewhere
    Silent(
        """\
        import torch

        def f(s):
            keep = torch.tril(torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool))
            return torch.where(keep, s, float("-inf")).softmax(-1)
        """
    ),
]


# The forms of a fill, most with a mask the function is given and nothing more: a parameter or a
# padding mask is no evidence by itself that a whole row is masked, so the forms are checked under
# --strict; the default mode's evidence is EVIDENCE_FLAGGED's.
@pytest.mark.parametrize("code, case", harness.params("TNL401", [replace(case, strict=True) for case in TNL401_FLAGGED], TNL401_SILENT))
def test_tnl401(code, case):
    harness.check(code, case)


# A causal mask aligned to the bottom right of a key-value cache: `tril(..., diagonal=s_k - s_q)`
# keeps the first key for every query, so no row is fully masked (Megatron's sink-attention test on
# the corpus); with a negative literal offset the first rows are fully masked.
KV_CACHE_CAUSAL = """
    import torch
    def attend(q, k, v):
        scores = q @ k.transpose(-2, -1)
        s_q, s_k = q.size(-2), k.size(-2)
        causal = torch.tril(torch.ones(s_q, s_k, dtype=torch.bool), diagonal=s_k - s_q)
        scores = scores.masked_fill(~causal, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
    """


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL401",
        flagged=[
            Flagged(
                KV_CACHE_CAUSAL.replace("diagonal=s_k - s_q", "diagonal=-1"),
                (7,),
                KV_CACHE_CAUSAL.replace("diagonal=s_k - s_q", "diagonal=-1").replace('float("-inf")', "torch.finfo(scores.dtype).min"),
            )
        ],
        silent=[Silent(KV_CACHE_CAUSAL)],
    ),
)
def test_a_causal_mask_offset_by_the_cache_covers_no_row(code, case):
    harness.check(code, case)


# Evidence before a report: a fill is reported by default only when its mask can cover a whole row
# by evidence (data the code is given, a name that says mask, a triangle that masks the first row).
# A mask built only from constants and shapes is reported in strict mode only (mmcv's local-window
# map stored in `__init__`, DeepSpeed's `arange(n).ge(step)` of a cache step on the corpus).
LOCAL_WINDOW = """\
    import torch
    from torch import nn

    class LocalAttention(nn.Module):
        def __init__(self, size, radius):
            super().__init__()
            pos = torch.arange(size)
            outside = (pos[:, None] - pos[None, :]).abs() > radius
            self.register_buffer("outside", outside)

        def forward(self, q, k, v):
            n = q.size(-2)
            s = q @ k.transpose(-2, -1)
            s = s.masked_fill(self.outside[:n, :n], float("-inf"))
            return s.softmax(-1) @ v
    """

WINDOW_PARAMETER = """\
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn

    class WindowedAttention(nn.Module):
        def __init__(self, max_len, span):
            super().__init__()
            far = np.ones((max_len, max_len), dtype=int)
            for i in range(max_len):
                far[i, max(i - span, 0):min(i + span + 1, max_len)] = 0
            self.far = nn.Parameter(torch.from_numpy(far).byte(), requires_grad=False)

        def forward(self, energy):
            n = energy.shape[-1]
            energy = energy.masked_fill_(self.far[:n, :n].bool(), float("-inf"))
            return F.softmax(energy, 3)
    """

CACHE_STEP = """\
    import torch
    import torch.nn.functional as F
    from decoding import DecodeState

    def step_softmax(scores, causal):
        if causal:
            if scores.shape[2] == 1:
                step = DecodeState.current().position()
                future = torch.arange(scores.shape[-1], device=scores.device).ge(step)
            else:
                future = ~torch.tril(torch.ones(scores.size(), device=scores.device)).to(bool)
            scores = torch.masked_fill(scores, future, float("-inf"))
        return F.softmax(scores, dim=-1)
    """

SHAPE_ONLY_MASK = """\
    import torch

    def attend(s):
        n = s.size(-1)
        mask = torch.arange(n)[:, None] < torch.arange(n)[None, :]
        return s.masked_fill(mask, float("-inf")).softmax(-1)

    def windowed(s):
        allowed = build_window(s.size(-1), 3)
        return s.masked_fill(~allowed, float("-inf")).softmax(-1)
    """

STRICT = "strict mode: no evidence"

EVIDENCE_FLAGGED = [
    Flagged(LOCAL_WINDOW, (14,), LOCAL_WINDOW.replace('float("-inf")', "torch.finfo(s.dtype).min"), strict=True, message=STRICT),
    Flagged(
        WINDOW_PARAMETER, (16,), WINDOW_PARAMETER.replace('float("-inf")', "torch.finfo(energy.dtype).min"), strict=True, message=STRICT
    ),
    Flagged(CACHE_STEP, (12,), CACHE_STEP.replace('float("-inf")', "torch.finfo(scores.dtype).min"), strict=True, message=STRICT),
    # a padding mask built from the lengths a pooling forward is given
    Flagged(
        """\
        import torch
        from torch import nn

        class AttentivePool(nn.Module):
            def forward(self, h, lengths):
                T = h.size(1)
                keep = torch.arange(T, device=h.device)[None, :] < lengths[:, None]
                e = self.score(h).squeeze(-1)
                e = e.masked_fill(~keep, float("-inf"))
                return (e.softmax(-1).unsqueeze(-1) * h).sum(1)
        """,
        (9,),
        """\
        import torch
        from torch import nn

        class AttentivePool(nn.Module):
            def forward(self, h, lengths):
                T = h.size(1)
                keep = torch.arange(T, device=h.device)[None, :] < lengths[:, None]
                e = self.score(h).squeeze(-1)
                e = e.masked_fill(~keep, torch.finfo(e.dtype).min)
                return (e.softmax(-1).unsqueeze(-1) * h).sum(1)
        """,
        strict=True,
        message="only for an input with no tokens (strict mode: `torch.arange(T",
    ),
    # an attribute set from an argument of another method (a decoder's memory mask)
    Flagged(
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Decoder(nn.Module):
            def init_memory(self, memory, memory_lengths):
                self.memory = memory
                self.blank = torch.arange(memory.size(1))[None] >= memory_lengths[:, None]

            def attend(self, query):
                scores = torch.bmm(self.memory, query.unsqueeze(-1)).squeeze(-1)
                scores.masked_fill_(self.blank, -float("inf"))
                return F.softmax(scores, dim=1)
        """,
        (12,),
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Decoder(nn.Module):
            def init_memory(self, memory, memory_lengths):
                self.memory = memory
                self.blank = torch.arange(memory.size(1))[None] >= memory_lengths[:, None]

            def attend(self, query):
                scores = torch.bmm(self.memory, query.unsqueeze(-1)).squeeze(-1)
                scores.masked_fill_(self.blank, torch.finfo(scores.dtype).min)
                return F.softmax(scores, dim=1)
        """,
        strict=True,
        message="is a padding or length mask",
    ),
    # a mask from a helper that takes nothing, which says by its name that it is one
    Flagged(
        """\
        import torch

        def attend(self, s):
            pad_mask = self.current_padding()
            return s.masked_fill(pad_mask, float("-inf")).softmax(-1)
        """,
        (5,),
        """\
        import torch

        def attend(self, s):
            pad_mask = self.current_padding()
            return s.masked_fill(pad_mask, torch.finfo(s.dtype).min).softmax(-1)
        """,
        strict=True,
        message="(strict mode: `pad_mask` is a padding or length mask)",
    ),
    # a causal mask written as a comparison of positions (named `mask`: its construction is seen),
    # and a window from a helper given only sizes
    Flagged(SHAPE_ONLY_MASK, (6, 10), SHAPE_ONLY_MASK.replace('float("-inf")', "torch.finfo(s.dtype).min"), strict=True, message=STRICT),
]

# Selections that real inputs leave empty for a whole row: a point with no neighbour inside the
# radius, an image without the class, keys dropped at random, a query no box matched.
NEIGHBOURS = """\
    import torch

    def neighbour_attention(q, k, v, pos, radius):
        dist = torch.cdist(pos, pos)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(dist > radius, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
    """
CLASS_POOL = """\
    import torch.nn.functional as F

    def class_pool(feats, logits, seg, c):
        logits = logits.masked_fill(seg != c, float("-inf"))
        w = F.softmax(logits.flatten(1), dim=1)
        return (w.unsqueeze(-1) * feats.flatten(1, 2)).sum(1)
    """
KEY_DROP = """\
    import torch

    def drop_keys(scores, p):
        dropped = torch.rand_like(scores) < p
        return scores.masked_fill(dropped, float("-inf")).softmax(-1)
    """
MATCHED = """\
    import torch
    from torch import nn

    class QueryPool(nn.Module):
        def forward(self, scores, matched):
            scores = scores.masked_fill(~matched, float("-inf"))
            return scores.softmax(-1)
    """
EVIDENCE_FLAGGED += [
    Flagged(
        NEIGHBOURS,
        (6,),
        NEIGHBOURS.replace('float("-inf")', "torch.finfo(scores.dtype).min"),
        message="`dist > radius` (line 6) keeps the values past a threshold",
    ),
    Flagged(
        CLASS_POOL,
        (4,),
        CLASS_POOL.replace('float("-inf")', "torch.finfo(logits.dtype).min").replace(
            "import torch.nn.functional as F\n", "import torch.nn.functional as F\n    import torch\n"
        ),
        message="`seg != c` (line 4) picks one class",
    ),
    Flagged(KEY_DROP, (5,), KEY_DROP.replace('float("-inf")', "torch.finfo(scores.dtype).min"), message="is a random draw"),
    Flagged(MATCHED, (6,), MATCHED.replace('float("-inf")', "torch.finfo(scores.dtype).min"), message="`matched` selects by its name"),
]

# Padding and length masks: empty only for a sequence with no tokens at all (judging.md).
PADDING_SILENT = [
    Silent("""\
    import torch

    class SelfAttention(torch.nn.Module):
        def forward(self, q, k, v, key_padding_mask):
            s = q @ k.transpose(-2, -1)
            s = s.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
            return s.softmax(-1) @ v
    """),
    Silent("""\
    import torch

    def pool(h, scores, lengths):
        pad = torch.arange(h.size(1), device=h.device)[None, :] >= lengths[:, None]
        scores = scores.masked_fill(pad, float("-inf"))
        return (scores.softmax(-1).unsqueeze(-1) * h).sum(1)
    """),
    Silent("""\
    import torch

    def attend(scores, input_ids, pad_token_id):
        scores = scores.masked_fill((input_ids == pad_token_id)[:, None, :], float("-inf"))
        return torch.softmax(scores, dim=-1)
    """),
    Silent("""\
    import torch

    def attend(scores, attention_mask):
        scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        return torch.softmax(scores, dim=-1)
    """),
    Silent("""\
    import torch

    def attend(scores, mask):
        return scores.masked_fill(mask, float("-inf")).softmax(-1)
    """),
]

EVIDENCE_SILENT = [Silent(LOCAL_WINDOW), Silent(WINDOW_PARAMETER), Silent(CACHE_STEP), Silent(SHAPE_ONLY_MASK)] + PADDING_SILENT


@pytest.mark.parametrize("code, case", harness.params("TNL401", EVIDENCE_FLAGGED, EVIDENCE_SILENT))
def test_tnl401_reports_by_default_only_a_mask_that_can_cover_a_row_by_evidence(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# TNL401: the log of a 0/1 mask added to the scores is a -inf fill where the mask is 0 (measured:
# a row that keeps nothing is NaN in the softmax and in every gradient entry of its scores)

LOG_MASK_FLAGGED = [
    # the kept entries are a threshold's selection: a row can keep nothing
    Flagged(
        """\
        import torch

        class NeighbourPool(torch.nn.Module):
            def forward(self, feats, dist, radius):
                near = (dist < radius).float()
                logits = feats @ feats.transpose(-2, -1)
                attn = torch.softmax(logits + near.log(), dim=-1)
                return attn @ feats
        """,
        (7,),
        None,
        message="radius",
    ),
    # function form, a label selection, log-softmax
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def class_pooling(scores, labels, c):
            same = labels[:, None] == c
            return F.log_softmax(scores + torch.log(same.float()), dim=1)
        """,
        (6,),
        None,
    ),
]

LOG_MASK_SILENT = [
    # a padding mask: empty only for a sequence with no tokens (strict mode's)
    Silent(
        """\
        import torch

        def attend(scores, attention_mask, v):
            bias = attention_mask[:, None, None, :].float().log()
            return torch.softmax(scores + bias, dim=-1) @ v
        """
    ),
    # a causal keep mask never empties a row
    Silent(
        """\
        import torch

        def causal(scores):
            n = scores.size(-1)
            keep = torch.tril(torch.ones(n, n))
            return torch.softmax(scores + keep.log(), dim=-1)
        """
    ),
    # the log of probabilities (no mask), and a mask's log that no softmax reads
    Silent(
        """\
        import torch

        def mix(scores, probs, keep):
            prior = torch.softmax(scores + probs.log(), dim=-1)
            return prior, (scores > 0).float().log()
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL401", LOG_MASK_FLAGGED, LOG_MASK_SILENT))
def test_tnl401_log_of_a_mask(code, case):
    harness.check(code, case)


# TNL401: a softmax written by hand over `-inf`-filled scores; its max subtraction does not help a
# row the mask empties (measured: -inf - -inf, NaN in the forward pass)
HAND_SOFTMAX_FLAGGED = [
    Flagged(
        """\
        import torch

        def pooled(scores, labels, c):
            x = scores.masked_fill(labels != c, float("-inf"))
            x = x - x.amax(dim=-1, keepdim=True)
            e = x.exp()
            return e / e.sum(dim=-1, keepdim=True)
        """,
        (4,),
        """\
        import torch

        def pooled(scores, labels, c):
            x = scores.masked_fill(labels != c, torch.finfo(scores.dtype).min)
            x = x - x.amax(dim=-1, keepdim=True)
            e = x.exp()
            return e / e.sum(dim=-1, keepdim=True)
        """,
        message="softmax by hand",
    ),
]

HAND_SOFTMAX_SILENT = [
    # a finite fill: the row becomes uniform
    Silent(
        """\
        import torch

        def pooled(scores, labels, c):
            x = scores.masked_fill(labels != c, -1e4)
            e = (x - x.amax(dim=-1, keepdim=True)).exp()
            return e / e.sum(dim=-1, keepdim=True)
        """
    ),
    # a causal fill never empties a row
    Silent(
        """\
        import torch

        def causal(scores):
            n = scores.size(-1)
            future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
            e = scores.masked_fill(future, float("-inf")).exp()
            return e / e.sum(dim=-1, keepdim=True)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL401", HAND_SOFTMAX_FLAGGED, HAND_SOFTMAX_SILENT))
def test_tnl401_softmax_by_hand(code, case):
    harness.check(code, case)


# Rows re-filled before the softmax (issue 16's false classes): the rows a `-inf` fill leaves with
# no entry are filled with a number before the softmax reads them, so no row is all `-inf`.
# Measured on torch 2.13 CPU: with `keep` all False in one row, the plain fill gives a NaN row and
# a NaN gradient of v; with `.masked_fill(~keep.any(-1, keepdim=True), 0.0)` after it, the
# forward and the gradients of the scores and of v are finite.
REFILL_HEAD = """\
    import torch
    from torch import nn


    class SparseAttention(nn.Module):
        def forward(self, q, k, v, threshold):
            s = q @ k.transpose(-2, -1)
            keep = s > threshold
            s = s.masked_fill(~keep, float("-inf"))
"""

REFILLED_SILENT = [
    Silent(REFILL_HEAD + "            s = s.masked_fill(~keep.any(-1, keepdim=True), 0.0)\n            return s.softmax(-1) @ v\n"),
    Silent(
        REFILL_HEAD
        + "            empty = torch.logical_not(keep.any(dim=-1))[..., None]\n"
        + "            s = s.masked_fill(empty, 0.0)\n"
        + "            return s.softmax(-1) @ v\n"
    ),
    Silent(REFILL_HEAD + "            s = s.masked_fill(keep.sum(-1, keepdim=True) == 0, 0.0)\n            return s.softmax(-1) @ v\n"),
    Silent(REFILL_HEAD + "            s = s.masked_fill((~keep).all(-1, keepdim=True), -1e4)\n            return s.softmax(-1) @ v\n"),
    Silent(REFILL_HEAD + "            s[~keep.any(-1)] = 0.0\n            return s.softmax(-1) @ v\n"),
]

REFILLED_FLAGGED = [
    # the empty rows of another mask are re-filled: this fill's rows are not
    Flagged(
        REFILL_HEAD
        + "            s = s.masked_fill(~(k.abs().sum(-1) > 0).any(-1, keepdim=True), 0.0)\n            return s.softmax(-1) @ v\n",
        (9,),
        REFILL_HEAD.replace('float("-inf")', "torch.finfo(s.dtype).min")
        + "            s = s.masked_fill(~(k.abs().sum(-1) > 0).any(-1, keepdim=True), 0.0)\n            return s.softmax(-1) @ v\n",
        message="keeps the values past a threshold",
    ),
    # a re-fill of every masked entry of some rows only (`any`, not `all`): a row can stay all -inf
    Flagged(
        REFILL_HEAD + "            s = s.masked_fill((~keep).any(-1, keepdim=True), 0.0)\n            return s.softmax(-1) @ v\n",
        (9,),
        REFILL_HEAD.replace('float("-inf")', "torch.finfo(s.dtype).min")
        + "            s = s.masked_fill((~keep).any(-1, keepdim=True), 0.0)\n            return s.softmax(-1) @ v\n",
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL401", REFILLED_FLAGGED, REFILLED_SILENT))
def test_tnl401_rows_refilled_before_the_softmax(code, case):
    harness.check(code, case)
