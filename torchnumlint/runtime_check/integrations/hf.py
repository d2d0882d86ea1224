"""nan_watch as a Hugging Face `transformers.TrainerCallback`.

    from torchnumlint.runtime_check.integrations.hf import NanWatchCallback

    watch_cb = NanWatchCallback()                     # mode="raise", every=1, ...
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[watch_cb])
    try:
        trainer.train()           # raises NonFiniteError at the first NaN/Inf, naming the module
    finally:
        watch_cb.close()          # the Trainer has no exception event: remove the hooks yourself

The watch is attached to the Trainer's model at `on_train_begin` and removed at `on_train_end`.
Module names are relative to that model (`transformer.h.0.mlp`). Steps advance at each
optimizer step, so `report.step` is `state.global_step` when the fault happened (with
`gradient_accumulation_steps`, the micro-batches of one optimizer step share its step). The
Trainer hands callbacks no GradScaler: under fp16, pass `scaler=trainer.accelerator.scaler`
(or rely on nan_watch finding it).

Options are nan_watch's (`mode`, `every`, `scope`, `scaler`, ...). `callback.reports` holds the
reports of every run it watched.
"""

from __future__ import annotations

import transformers

from torchnumlint.runtime_check.integrations._holder import WatchHolder


class NanWatchCallback(WatchHolder, transformers.TrainerCallback):
    """A `TrainerCallback` that runs `nan_watch` on the Trainer's model during `train()`."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.attach(model)

    def on_train_end(self, args, state, control, **kwargs):
        self.detach(flush=True)

    def close(self) -> None:
        """Remove the hooks after `trainer.train()` raised (the Trainer calls no callback then)."""
        self.detach()
