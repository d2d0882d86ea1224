"""The global gradient norm of each checked step, and spikes against the run's recent history.

A NaN is often the end of an explosion: the gradient grows 12 -> 295 -> 2e4 -> 4e12 -> NaN over a
few steps. The norm of all parameter gradients together is taken at the end of each checked
backward (`torch._foreach_norm` in float64, so a GradScaler's scaled gradients do not overflow it),
divided by the GradScaler's scale when there is one, and kept for the last `keep` checked steps. A
step whose norm exceeds `spike` times the median of the earlier steps (at least `warmup` of them)
is a spike; every incident report shows the last norms.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Deque, List, Optional, Sequence, Tuple

import torch


def total_norm(grads: Sequence[torch.Tensor], scale: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
    """The 2-norm of all `grads` together, as a 0-dim tensor on their device (no synchronisation)."""
    if not grads:
        return None
    norms = torch._foreach_norm(list(grads), 2, dtype=torch.float64)  # float64: a scaled norm does not overflow
    device = norms[0].device
    norm = torch.linalg.vector_norm(torch.stack([n.to(device) for n in norms]))
    return norm / scale.to(device, torch.float64) if scale is not None else norm


class NormHistory:
    """(step, norm) of the last `keep` checked steps; the last backward of a step is its norm."""

    def __init__(self, spike: float = 10.0, keep: int = 16, warmup: int = 5) -> None:
        self.spike = spike
        self.warmup = warmup
        self._norms: Deque[Tuple[int, float]] = deque(maxlen=keep)
        self._spiking = False  # the previous step was a spike: an explosion already reported

    @property
    def norms(self) -> List[Tuple[int, float]]:
        return list(self._norms)

    def add(self, step: int, norm: float) -> Optional[float]:
        """Keep the norm of `step`; the baseline (median of earlier steps) when it starts a spike
        (the steps of an explosion that go on rising are not new spikes)."""
        if self._norms and self._norms[-1][0] == step:
            self._norms.pop()
        earlier = [n for _, n in self._norms if math.isfinite(n)]
        self._norms.append((step, norm))
        if len(earlier) < self.warmup or not math.isfinite(norm):
            return None
        baseline = statistics.median(earlier)
        starts = norm > self.spike * baseline and not self._spiking
        self._spiking = norm > self.spike * baseline
        return baseline if starts else None

    def growing(self) -> bool:
        """Whether the latest norms rose past `spike` times the median of the earlier ones (or
        ended non-finite after finite ones that did): the shape of an explosion."""
        norms = [n for _, n in self._norms]
        finite = [n for n in norms if math.isfinite(n)]
        if len(finite) < 2:
            return False
        return max(finite[-3:]) > self.spike * statistics.median(finite[:-3] or finite[:1])
