"""nan_watch under mixed precision: a GradScaler's overflow steps are expected, its collapse is not.

A GradScaler multiplies the loss by a large scale; when a gradient overflows it skips that
optimizer step and halves the scale. Those non-finite gradients are the scaler doing its job, so
on a backward whose loss is finite they are only counted. A scale that keeps falling (`max_skips`
checked backwards in a row with non-finite gradients) means the gradients are non-finite at any
scale: that is an incident ("scale-collapse").

The scaler is the one given (`scaler=`), else found once the run has one: an enabled
`torch.amp.GradScaler` (CUDA's and CPU's alike) that has already scaled a loss, searched among the
live objects at the first checked backward and again at the first non-finite one (a search walks
the garbage collector's objects, so it is never done per step).
"""

from __future__ import annotations

import gc
from typing import List, Optional

import torch

SEARCHES = 2


def _in_use(scaler: object) -> bool:
    # type(), not isinstance(): some live objects (deprecated torch proxies) warn when asked their __class__
    return issubclass(type(scaler), torch.amp.GradScaler) and scaler.is_enabled() and scaler._scale is not None


def find_scaler() -> Optional[torch.amp.GradScaler]:
    """An enabled GradScaler that has scaled a loss, or None."""
    return next((obj for obj in gc.get_objects() if _in_use(obj)), None)


class ScalerWatch:
    """The scaler of the run and its skipped steps."""

    def __init__(self, scaler: Optional[torch.amp.GradScaler], max_skips: int) -> None:
        if max_skips < 1:
            raise ValueError("max_skips must be >= 1")
        self.scaler = scaler
        self.max_skips = max_skips
        self.skips = 0  # expected overflow steps, in all
        self.consecutive = 0  # checked backwards in a row with an overflow
        self.scales: List[float] = []  # the scale at each skip of the current run of skips
        self._searches_left = 0 if scaler is not None else SEARCHES
        self._scale_at_skip: Optional[float] = None

    def active(self, search: bool = False) -> bool:
        """Whether a GradScaler scales this run's losses; `search` looks for one if none is known
        (at most SEARCHES times per watch)."""
        if self.scaler is None and search and self._searches_left:
            self._searches_left -= 1
            self.scaler = find_scaler()
        return self.scaler is not None and _in_use(self.scaler)

    def scale(self) -> Optional[torch.Tensor]:
        """The current scale as a tensor on its device (no synchronisation), when active."""
        return self.scaler._scale if self.active() else None

    def overflow(self) -> bool:
        """Count an expected overflow; True when the skips in a row reach `max_skips`."""
        self.skips += 1
        self.consecutive += 1
        self._scale_at_skip = float(self.scaler.get_scale())
        self.scales.append(self._scale_at_skip)
        return self.consecutive >= self.max_skips

    def clean(self) -> None:
        """A checked backward with finite gradients: the run of skips is over."""
        self.consecutive = 0
        self.scales.clear()

    def skip_ended(self) -> bool:
        """Whether the scaler has lowered its scale (`scaler.update()`) since the last overflow,
        i.e. that skipped step is over (asked at each forward while an overflow is pending; the
        scale only falls when a step is skipped)."""
        if self._scale_at_skip is None or float(self.scaler.get_scale()) >= self._scale_at_skip:
            return False
        self._scale_at_skip = None
        return True
