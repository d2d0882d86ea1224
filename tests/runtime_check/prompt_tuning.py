"""Prompt tuning, the seed of issue 20: a frozen encoder, a learned `prompt_embeddings`, and a
consistency loss between an augmented view (the student) and the clean view (the "teacher"), both
through the same prompted model. The prompt pushes one class of the clean view `SPREAD` below the
rest, so softmax(teacher_logits) underflows to 0 there: the loss stays finite and the gradient of
`prompt_embeddings` is NaN (TNL101's hazard), made by the KL in `kl_helpers.py`."""

import torch
from torch import nn

from tests.runtime_check.kl_helpers import consistency_kl

DIM, VOCAB, PROMPTS = 8, 1000, 2
SPREAD = 200.0  # softmax of 1000 classes underflows to exactly 0 past ~97 in float32


class PromptedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(DIM, VOCAB)
        with torch.no_grad():
            self.encoder.weight.mul_(0.1)
            self.encoder.weight[0] = 0.0
            self.encoder.weight[0, 0] = -SPREAD / 4.0  # class 0 reads feature 0 of the prompted input
        self.encoder.requires_grad_(False)  # prompt tuning: only the prompt learns
        self.prompt_embeddings = nn.Parameter(torch.zeros(PROMPTS, DIM))
        with torch.no_grad():
            self.prompt_embeddings[:, 0] = 4.0

    def forward(self, x):
        return self.encoder(x + self.prompt_embeddings.mean(0))


def views(seed=0, batch=4):
    """A clean batch near 0 and an augmented copy whose feature 0 is pulled back to 0 (so the
    student's class 0 stays within reach of softmax)."""
    g = torch.Generator().manual_seed(seed)
    clean = 0.1 * torch.randn(batch, DIM, generator=g)
    augmented = clean + 0.05 * torch.randn(batch, DIM, generator=g)
    augmented[:, 0] = -4.0
    return clean, augmented


def train_step(model, optimizer, clean, augmented):
    teacher_logits = model(clean)
    student_logits = model(augmented)
    loss = consistency_kl(student_logits, teacher_logits)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
