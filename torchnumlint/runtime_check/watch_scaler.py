"""nan_watch under mixed precision: a GradScaler's overflow steps are expected, its collapse is not.

A GradScaler multiplies the loss by a large scale; when a gradient overflows it skips that
optimizer step and halves the scale. Those non-finite gradients are the scaler doing its job, so
on a backward whose loss is finite they are only counted. A scale that keeps falling (`limit`
checked backwards in a row with non-finite gradients) means the gradients are non-finite at any
scale: that is an incident ("scale-collapse").

The limit is derived, unless given (`max_skips`), from the scaler's initial scale and the dtype
the scaled gradients overflow in (float16 under fp16 autocast): a healthy gradient is at most what
float16 holds (65504), so an overflow is the scaler's doing only while the scale is above
`floor = max(1, finfo(dtype).max / 65504)` (1 for float16; for bfloat16 a scale of 5.2e33). The
scale halves once per skip, so a run whose skips reach the floor, `log2(init_scale / floor) + 1`
skips in a row (17 from the default 65536, 33 from 2**32), is non-finite at a scale that cannot
overflow a healthy gradient: a collapse. A healthy run starting at 2**32 settles after 14 to 18
halvings (issue 17), which a fixed limit of 12 killed. `remaining()` says how many more skips in a
row the run has before that.

The scaler is the one given (`scaler=`), else found where the backward was called: an enabled
`torch.amp.GradScaler` (CUDA's and CPU's alike) that has already scaled a loss, held by a frame on
the caller's stack (a local or global `scaler`, or the `scaler` attribute of one: Lightning's
precision plugin, accelerate's Accelerator). The stack is searched at the first checked backward
and at each non-finite one while no scaler is known, never per step; a scaler that merely exists
elsewhere in the process is not this run's.
"""

from __future__ import annotations

import math
from types import FrameType
from typing import Any, Callable, Iterable, List, Optional, cast

import torch

FP16_MAX = 65504.0  # the largest healthy gradient an overflow can be blamed on the scale for


def collapse_limit(init_scale: float, dtype: torch.dtype = torch.float16) -> int:
    """Skips in a row after which a scaler starting at `init_scale` has halved down to the floor
    of `dtype` (see the module docstring): from there on, an overflow is the model's own."""
    floor = max(1.0, torch.finfo(dtype).max / FP16_MAX)
    if init_scale <= floor:
        return 1
    return int(math.ceil(math.log2(init_scale / floor))) + 1


def _in_use(scaler: Any) -> bool:
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

    def __init__(self, scaler: Optional[torch.amp.GradScaler], max_skips: Optional[int] = None, dtype: torch.dtype = torch.float16) -> None:
        if max_skips is not None and max_skips < 1:
            raise ValueError("max_skips must be >= 1")
        self.scaler = scaler
        self.max_skips = max_skips  # None: derived from the scaler (`limit`)
        self.dtype = dtype
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
        return self.scaler._scale if self.scaler is not None and self.active() else None

    def limit(self) -> int:
        """Skips in a row that make a collapse: `max_skips` when given, else `collapse_limit` of
        the scaler's initial scale (65536, torch's default, before a scaler is known)."""
        if self.max_skips is not None:
            return self.max_skips
        init = getattr(self.scaler, "_init_scale", None) if self.scaler is not None else None
        return collapse_limit(float(init) if init is not None else 65536.0, self.dtype)

    def remaining(self) -> int:
        """How many more skips in a row before the run is a collapse."""
        return max(0, self.limit() - self.consecutive)

    def overflow(self) -> bool:
        """Count an expected overflow; True when the skips in a row reach `limit()` (once per
        run of skips: the collapse is one incident)."""
        self.skips += 1
        self.consecutive += 1
        assert self.scaler is not None  # an expected overflow: a scaler is active
        self._scale_at_skip = float(self.scaler.get_scale())
        self.scales.append(self._scale_at_skip)
        return self.consecutive == self.limit()

    def clean(self) -> None:
        """A checked backward with finite gradients: the run of skips is over."""
        self.consecutive = 0
        self.scales.clear()

    def skip_ended(self) -> bool:
        """Whether the scaler has lowered its scale (`scaler.update()`) since the last overflow,
        i.e. that skipped step is over (asked at each forward while an overflow is pending; the
        scale only falls when a step is skipped)."""
        # an overflow is pending (`_scale_at_skip`) only where `overflow` saw the scaler
        if self._scale_at_skip is None or float(cast(torch.amp.GradScaler, self.scaler).get_scale()) >= self._scale_at_skip:
            return False
        self._scale_at_skip = None
        return True
