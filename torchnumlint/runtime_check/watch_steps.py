"""How nan_watch counts training steps: by the optimizer's steps, or by the user's `watch.step()`.

One counter for every kind of training code. A global optimizer post-step hook
(`torch.optim.optimizer.register_optimizer_step_post_hook`) advances the step whenever an optimizer
holding one of the model's parameters steps, so code that never calls `watch.step()` (a Lightning
`training_step`, a Hugging Face `Trainer`) advances too, and `every=N` works there. From the first
explicit `watch.step()` on, only those calls advance it (the optimizer's steps are then ignored, so
a step is never counted twice); a `watch.step()` right after the optimizer step it follows, in the
same training step, does not advance again. With gradient accumulation, the micro-batches of one
optimizer step share its step number.
"""

from __future__ import annotations

import weakref
from typing import Iterable

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook


class StepCounter:
    """The current step (`index`) and whether it is checked (`every`)."""

    def __init__(self, every: int, params: Iterable[torch.Tensor]) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.every = every
        self.index = 0
        self.manual = False
        self._advanced_since_forward = False
        self._param_ids = {id(p) for p in params}
        self._owns_cache: "weakref.WeakKeyDictionary[torch.optim.Optimizer, bool]" = weakref.WeakKeyDictionary()
        self._handle = register_optimizer_step_post_hook(self._optimizer_stepped)

    @property
    def checking(self) -> bool:
        return self.index % self.every == 0

    def forward_started(self) -> None:
        """The watched model's forward begins: what advances the step from now on is a new step's end."""
        self._advanced_since_forward = False

    def explicit(self) -> None:
        """`watch.step()`: from now on only these calls advance the step."""
        already = not self.manual and self._advanced_since_forward
        self.manual = True
        if not already:
            self._advance()

    def skipped(self) -> None:
        """The optimizer step of this training step was skipped (a GradScaler overflow): the step
        ended all the same."""
        if not self.manual:
            self._advance()

    def close(self) -> None:
        self._handle.remove()

    def _optimizer_stepped(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        if not self.manual and self._owns(optimizer):
            self._advance()

    def _advance(self) -> None:
        self.index += 1
        self._advanced_since_forward = True

    def _owns(self, optimizer: torch.optim.Optimizer) -> bool:
        """Whether `optimizer` steps a parameter of the watched model (any optimizer, for a model
        without parameters)."""
        owns = self._owns_cache.get(optimizer)
        if owns is None:
            owns = not self._param_ids or any(id(p) in self._param_ids for group in optimizer.param_groups for p in group["params"])
            self._owns_cache[optimizer] = owns
        return owns
