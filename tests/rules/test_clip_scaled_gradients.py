"""TNL307 clip-scaled-gradients: a clip between a scaled backward and the scaler's step with no
`unscale_` first; the fix inserts `scaler.unscale_(optimizer)` just before the clip."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL307"

FLAGGED = [
    # a training loop: clip by norm, the optimizer an attribute
    Flagged(
        """\
        import torch


        class Trainer:
            def train_epoch(self, loader):
                for batch in loader:
                    with torch.autocast("cuda"):
                        loss = self.model(batch).mean()
                    self.scaler.scale(loss).backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.optimizer.zero_grad()
        """,
        lines=(10,),
        fixed="""\
        import torch


        class Trainer:
            def train_epoch(self, loader):
                for batch in loader:
                    with torch.autocast("cuda"):
                        loss = self.model(batch).mean()
                    self.scaler.scale(loss).backward()
                    self.scaler.unscale_(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.optimizer.zero_grad()
        """,
        message="`self.scaler.unscale_(self.optimizer)`",
    ),
    # gradient accumulation: the clip first in an `if` block, by value, an imported alias
    Flagged(
        """\
        from torch.nn.utils import clip_grad_value_


        def fit(model, loader, opt, scaler, accum):
            for i, batch in enumerate(loader):
                loss = model(batch) / accum
                scaler.scale(loss).backward()
                if (i + 1) % accum == 0:
                    clip_grad_value_(model.parameters(), 0.5)
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
        """,
        lines=(9,),
        fixed="""\
        from torch.nn.utils import clip_grad_value_


        def fit(model, loader, opt, scaler, accum):
            for i, batch in enumerate(loader):
                loss = model(batch) / accum
                scaler.scale(loss).backward()
                if (i + 1) % accum == 0:
                    scaler.unscale_(opt)
                    clip_grad_value_(model.parameters(), 0.5)
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
        """,
    ),
]

SILENT = [
    # unscale_ before the clip
    Silent(
        """\
        import torch


        def fit(model, loader, opt, scaler):
            for batch in loader:
                scaler.scale(model(batch)).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
        """
    ),
    # no scaler
    Silent(
        """\
        import torch


        def fit(model, loader, opt):
            for batch in loader:
                model(batch).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
        """
    ),
    # a scaled backward, but the clip comes after the step (the step unscaled)
    Silent(
        """\
        import torch


        def fit(model, batch, opt, scaler):
            scaler.scale(model(batch)).backward()
            scaler.step(opt)
            scaler.update()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        """
    ),
    # Accelerate clips after unscaling itself
    Silent(
        """\
        def fit(accelerator, model, loader, opt):
            for batch in loader:
                accelerator.backward(model(batch))
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
        """
    ),
    # the clip in another function than the scaled backward: not known to sit between them
    Silent(
        """\
        import torch


        def clip(model):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)


        def fit(model, batch, opt, scaler):
            scaler.scale(model(batch)).backward()
            scaler.unscale_(opt)
            clip(model)
            scaler.step(opt)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_clip_scaled_gradients(code, case):
    harness.check(code, case)
