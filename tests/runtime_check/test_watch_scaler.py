"""Under a GradScaler, overflow steps are expected and counted; a collapsing scale, a NaN forward
and a NaN loss are incidents (item 7). fp16 autocast on the CPU, the scaler on the CPU."""

import pytest
import torch
from torch import nn

from torchnumlint.runtime_check import NonFiniteError, nan_watch
from tests.runtime_check import founding_case as fc
from tests.runtime_check import watch_models as wm


def _fp16_steps(model, scaler, steps, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


@pytest.mark.parametrize("given", [True, False], ids=["scaler-given", "scaler-found"])
def test_overflow_steps_are_counted_not_raised(given):
    """Targets 10 away: at the default scale 65536 the fp16 gradients overflow; the scaler skips
    five steps, halving its scale each time, then trains. Raise mode does not raise; every
    halving is one counted skip, and skipped steps are steps."""
    torch.manual_seed(0)
    model = wm.Net()
    x, y = wm.batch()
    scaler = torch.amp.GradScaler("cpu")
    with nan_watch(model, scaler=scaler if given else None) as watch:
        _fp16_steps(model, scaler, 6, x, y + 10)
    assert watch.reports == []
    assert scaler.get_scale() == 65536.0 / 2**5 and watch.scaler.skips == 5 and watch.step_index == 6
    assert watch.history.norms[-1][0] == 5 and watch.history.norms[-1][1] < 1e3  # unscaled norm


def test_a_collapsing_scale_is_an_incident():
    """A NaN gradient at every scale (the founding KL case): max_skips skips in a row."""
    model = fc.Distiller()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(0))
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model, scaler=scaler, max_skips=3):
            for _ in range(5):
                scaler.scale(fc.distill_loss(*model(x))).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.step) == ("scaler", "scale-collapse", "backbone", 2)
    assert "skipped 3 checked steps in a row (scale 6.55e+04 -> 3.28e+04 -> 1.64e+04)" in report.hint
    assert report.nonfinite_grads == ["backbone.prompt_embeddings_state"]


def test_a_nan_forward_under_the_scaler_is_an_incident():
    model = wm.Net(at=1)
    x, y = wm.batch()
    scaler = torch.amp.GradScaler("cpu")
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model, scaler=scaler):
            _fp16_steps(model, scaler, 3, x, y)
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.step) == ("forward", "nan", "unstable", 1)


def test_a_nan_loss_under_the_scaler_is_an_incident():
    model = wm.Net()
    x, y = wm.batch()
    y[0] = float("nan")  # the target, not an input of the model: the loss goes NaN
    scaler = torch.amp.GradScaler("cpu")
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model, scaler=scaler):
            _fp16_steps(model, scaler, 1, x, y)
    report = info.value.report
    # a NaN target is data (issue 20 item 4): named with its row, not blamed on the loss code
    assert (report.phase, report.kind, report.name, report.step) == ("data", "data", "y", 0)
    assert report.what == "loss input `y`, batch positions [0] of 8"
