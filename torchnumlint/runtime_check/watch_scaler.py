"""nan_watch under mixed precision: a GradScaler's overflow steps are expected, its collapse is not.

A GradScaler multiplies the loss by a large scale; when a gradient overflows it skips that
optimizer step and halves the scale. Those non-finite gradients are the scaler doing its job, so
on a backward whose loss is finite they are only counted. A scale that keeps falling (`max_skips`
checked backwards in a row with non-finite gradients) means the gradients are non-finite at any
scale: that is an incident ("scale-collapse").

The scaler is the one given (`scaler=`), else found where the backward was called: an enabled
`torch.amp.GradScaler` (CUDA's and CPU's alike) that has already scaled a loss, held by a frame on
the caller's stack (a local or global `scaler`, or the `scaler` attribute of one: Lightning's
precision plugin, accelerate's Accelerator). The stack is searched at the first checked backward
and at each non-finite one while no scaler is known, never per step; a scaler that merely exists
elsewhere in the process is not this run's.
"""

from __future__ import annotations

from types import FrameType
from typing import Callable, Iterable, List, Optional

import torch

def _in_use(scaler: object) -> bool:
    # type(), not isinstance(): some live objects (deprecated torch proxies) warn when asked their __class__
    return issubclass(type(scaler), torch.amp.GradScaler) and scaler.is_enabled() and scaler._scale is not None


def find_scaler(frames: Iterable[FrameType]) -> Optional[torch.amp.GradScaler]:
    """An enabled GradScaler that has scaled a loss, held by one of `frames` (a local, a module
    global, or a local's instance attribute `scaler`), or None."""
    for frame in frames:
        values = list(frame.f_locals.values())
        if frame.f_code.co_name == "<module>":
            values += list(frame.f_globals.values())
        for value in values:
            attrs = getattr(value, "__dict__", None)  # the instance's own attributes: no property runs
            for candidate in (value, attrs.get("scaler") if isinstance(attrs, dict) else None):
                if _in_use(candidate):
                    return candidate
    return None


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
        self._searched = False
        self._scale_at_skip: Optional[float] = None

    def active(self) -> bool:
        """Whether a GradScaler scales this run's losses."""
        return self.scaler is not None and _in_use(self.scaler)

    def search(self, frames: Callable[[], Iterable[FrameType]], nonfinite: bool) -> None:
        """Look for the run's scaler on the caller's stack, at the first checked backward and at
        each non-finite one, while none is known."""
        if self.scaler is None and (nonfinite or not self._searched):
            self._searched = True
            self.scaler = find_scaler(frames())

    def scale(self) -> Optional[torch.Tensor]:
        """The current scale as a tensor on its device (no synchronisation), when active."""
        return self.scaler._scale if self.active() else None

    def overflow(self) -> bool:
        """Count an expected overflow; True when the skips in a row reach `max_skips` (once per
        run of skips: the collapse is one incident)."""
        self.skips += 1
        self.consecutive += 1
        self._scale_at_skip = float(self.scaler.get_scale())
        self.scales.append(self._scale_at_skip)
        return self.consecutive == self.max_skips

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
