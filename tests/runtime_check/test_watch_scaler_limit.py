"""nan_watch's scale-collapse limit is derived from the scaler's initial scale and the dtype
(issue 17 item 4): a healthy run whose scaler starts at 2**32 halves its scale 15 to 21 times
before it trains (measured below) and must not be killed; a NaN at every scale still is, once
the scale has halved down to 1. fp16 autocast on the CPU, the scaler on the CPU."""

import pytest
import torch
from torch import nn

from tests.runtime_check import founding_case as fc
from tests.runtime_check import watch_models as wm
from torchnumlint.runtime_check import NonFiniteError, nan_watch
from torchnumlint.runtime_check.watch_scaler import ScalerWatch, collapse_limit


@pytest.mark.parametrize(
    "init, dtype, limit",
    [
        (65536.0, torch.float16, 17),  # 16 halvings to scale 1, the 17th skip is at scale 1
        (2.0**32, torch.float16, 33),
        (2.0**4, torch.float16, 5),
        (1.0, torch.float16, 1),
        (65536.0, torch.bfloat16, 1),  # no healthy bfloat16 gradient overflows at scale 65536
    ],
)
def test_collapse_limit(init, dtype, limit):
    assert collapse_limit(init, dtype) == limit


def test_remaining_counts_down_and_a_given_limit_wins():
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
    watch = ScalerWatch(scaler)
    assert (watch.limit(), watch.remaining()) == (9, 9)
    watch.overflow()
    assert watch.remaining() == 8
    assert ScalerWatch(scaler, max_skips=3).limit() == 3


def _train(model, scaler, steps, x, y, summed, watch_kwargs):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with nan_watch(model, scaler=scaler, **watch_kwargs) as watch:
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = nn.functional.mse_loss(model(x), y, reduction="sum" if summed else "mean")
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    return watch


@pytest.mark.parametrize(
    "shift, summed, skips",
    [(0.0, False, 15), (0.0, True, 18), (10.0, False, 21)],
    ids=["mean-loss", "summed-loss", "targets-10-away"],
)
def test_a_healthy_run_from_2_to_the_32_is_not_killed(shift, summed, skips):
    """Measured: 15, 18 and 21 halvings before the first finite step, all below the derived limit
    of 33; the old fixed limit of 12 raised on each."""
    torch.manual_seed(0)
    model = wm.Net()
    x, y = wm.batch()
    watch = _train(model, torch.amp.GradScaler("cpu", init_scale=2.0**32), 40, x, y + shift, summed, {})
    assert watch.reports == [] and watch.scaler.skips == skips
    torch.manual_seed(0)
    model = wm.Net()
    with pytest.raises(NonFiniteError):
        _train(model, torch.amp.GradScaler("cpu", init_scale=2.0**32), 40, x, y + shift, summed, {"max_skips": 12})


def test_a_nan_at_every_scale_is_a_collapse_at_the_derived_limit():
    """The founding KL case under a scaler starting at 2**4: the fifth skip is at scale 1."""
    model = fc.Distiller()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(0))
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model, scaler=scaler):
            for _ in range(8):
                scaler.scale(fc.distill_loss(*model(x))).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
    report = info.value.report
    assert (report.kind, report.step) == ("scale-collapse", 4)
    assert "skipped 5 checked steps in a row (scale 16 -> 8 -> 4 -> 2 -> 1), its collapse limit (5:" in report.hint
