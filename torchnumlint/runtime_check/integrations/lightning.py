"""nan_watch as a PyTorch Lightning callback.

    from torchnumlint.runtime_check.integrations.lightning import NanWatchCallback

    trainer = lightning.Trainer(callbacks=[NanWatchCallback()])   # mode="raise", every=1, ...
    trainer.fit(model)            # raises NonFiniteError at the first NaN/Inf, naming the module

The watch is attached to the LightningModule when training starts (after the sanity check, so
its validation forwards are not steps) and removed when training ends or fails. Module names are
relative to the LightningModule (`net.encoder.0`). Steps advance at each optimizer step, so
`report.step` is the `trainer.global_step` of the fault (with `accumulate_grad_batches`, the
batches of one optimizer step share its step). Under `precision="16-mixed"` the trainer's
GradScaler is handed to the watch, whose overflow steps are then expected, not incidents.

Options are nan_watch's (`mode`, `every`, `scope`, `scaler`, ...). `callback.reports` holds the
reports of every fit it watched.
"""

from __future__ import annotations

import lightning.pytorch as pl

from torchnumlint.runtime_check.integrations._holder import WatchHolder


class NanWatchCallback(WatchHolder, pl.Callback):
    """A Lightning `Callback` that runs `nan_watch` on the LightningModule during training."""

    def on_train_start(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        self.attach(pl_module, scaler=getattr(trainer.precision_plugin, "scaler", None))

    def on_train_end(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        self.detach(flush=True)

    def on_exception(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule", exception: BaseException) -> None:
        self.detach()
