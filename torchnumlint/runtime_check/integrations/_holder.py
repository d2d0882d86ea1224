"""What both framework callbacks share: the nan_watch options given at construction, the one
watch of the current fit (attached when training starts, detached when it ends or fails), and its
reports. Torch-only; the framework modules subclass it together with their framework's callback."""

from __future__ import annotations

from typing import Any, List, Optional

from torch import nn

from torchnumlint.runtime_check.watch import MODES, NanReport, NanWatch, nan_watch


class WatchHolder:
    """Holds the `NanWatch` of one training run. `options` are nan_watch's (`every`, `scope`,
    `scaler`, `lint`, ...); `mode` is checked here so a typo fails when the callback is built,
    not after the framework has set up the run."""

    def __init__(self, mode: str = "raise", **options: Any) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self.options = options
        self.watch: Optional[NanWatch] = None
        self._reports: List[NanReport] = []

    @property
    def reports(self) -> List[NanReport]:
        """Every report of the runs this callback watched, in order (they outlive `close`)."""
        return self._reports + (self.watch.reports if self.watch is not None else [])

    def attach(self, model: nn.Module, **found: Any) -> NanWatch:
        """Watch `model` from now on. `found` are options the framework knows (its GradScaler);
        options given to the callback win over them."""
        self.detach()  # a second fit with the same callback gets a fresh watch
        options = {k: v for k, v in found.items() if v is not None}
        options.update(self.options)
        self.watch = nan_watch(model, mode=self.mode, **options)
        return self.watch

    def detach(self, flush: bool = False) -> None:
        """Remove the watch's hooks (and its optimizer hook); its reports are kept. `flush` (at
        the normal end of training) reads what is still pending first, which may raise in raise
        mode; after a failure nothing is read."""
        watch, self.watch = self.watch, None
        if watch is None:
            return
        try:
            if flush:
                watch.flush()
        finally:
            self._reports.extend(watch.reports)
            watch.close()
