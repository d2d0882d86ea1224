"""Tiny models with planted faults, shared by the nan_watch tests. Each fault is deliberate and
sits at a known module and step; the classes live in this file, so the static findings of a
report about them are this file's (TNL204 at `RowNorm.forward`)."""

import torch
from torch import nn


class Poison(nn.Module):
    """Identity, except that its `at`-th forward (0-based, training mode) returns `value` times x:
    a NaN (or Inf) planted at a known step when one forward makes one step."""

    def __init__(self, at=None, value=float("nan")):
        super().__init__()
        self.at = at
        self.value = value
        self.calls = 0

    def forward(self, x):
        call, self.calls = self.calls, self.calls + 1
        return x * self.value if call == self.at else x


class RowNorm(nn.Module):
    """The 2-norm of each row, written by hand: finite at a zero row, but its derivative there
    is 0 * inf = NaN (the gradient passed back to the input)."""

    def forward(self, x):
        return torch.sqrt((x * x).sum(-1, keepdim=True))


class NormNet(nn.Module):
    """Linear -> ReLU -> RowNorm -> Linear; a ReLU that zeroes a whole row (bias -100) makes
    RowNorm's backward NaN while every forward value and the loss stay finite."""

    def __init__(self, dead=False):
        super().__init__()
        self.inp = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.norm = RowNorm()
        self.head = nn.Linear(1, 1)
        if dead:
            with torch.no_grad():
                self.inp.bias.fill_(-100.0)

    def forward(self, x):
        return self.head(self.norm(self.act(self.inp(x))))


class Net(nn.Module):
    """Linear -> ReLU -> Poison -> Linear, for faults planted at a step."""

    def __init__(self, at=None, value=float("nan")):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.unstable = Poison(at, value)
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(self.unstable(torch.relu(self.inp(x))))


def batch(seed=0, n=8):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g)


def train(model, steps, opt=None, watch=None, x=None, y=None, loss_fn=torch.nn.functional.mse_loss):
    """`steps` plain training steps (forward, loss, backward, optimizer step); `watch.step()`
    after each when a watch is given."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.01)
    if x is None:
        x, y = batch()
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if watch is not None:
            watch.step()
    return opt
