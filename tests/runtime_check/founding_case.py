"""The founding case of torchnumlint: a self-distillation loss whose KL target is a softmax of
logits produced by a parameter. Once that softmax underflows to 0, the forward loss stays finite
but the gradient of the parameter is NaN (TNL101). Used by test_watch.py; the KL line is the
deliberate hazard that nan_watch must trace back to `backbone.prompt_embeddings_state`."""

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 1000


class Backbone(nn.Module):
    def __init__(self, dim: int = 16, rows: int = 2, spread: float = 200.0):
        super().__init__()
        self.encoder = nn.Linear(dim, VOCAB)
        state = torch.zeros(rows, VOCAB)
        state[0, 0] = -spread  # one logit `spread` below the rest: softmax underflows to 0 past ~97
        self.prompt_embeddings_state = nn.Parameter(state)

    def forward(self, x):
        return self.encoder(x), self.prompt_embeddings_state * 1.0


class Distiller(nn.Module):
    def __init__(self, spread: float = 200.0):
        super().__init__()
        self.backbone = Backbone(spread=spread)

    def forward(self, x):
        s1, s2 = self.backbone(x)
        return s1, s2


def distill_loss(s1, s2):
    return F.kl_div(F.log_softmax(s1, -1), F.softmax(s2, -1), reduction="batchmean")


class LogProbs(nn.Module):
    """A module that creates the non-finite value in its own forward: log of a softmax."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 10)

    def forward(self, x):
        return torch.log(torch.softmax(self.proj(x), -1))
