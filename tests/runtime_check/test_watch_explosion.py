"""The global gradient norm per checked step: a spike is reported before the first NaN, and the
NaN's report shows the last norms and the hint to clip (item 10)."""

import warnings

import pytest
import torch
from torch import nn

from torchnumlint.runtime_check import NonFiniteError, NonFiniteWarning, nan_watch


def _diverging_run(watch_options, steps=40, boost_at=8):
    """A small regression trained at lr 0.01, then at lr 30 from `boost_at` on: the gradient norm
    jumps ~300x, then grows ~100x a step until the loss overflows."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    watch = nan_watch(model, **watch_options)
    try:
        for i in range(steps):
            if i == boost_at:
                opt.param_groups[0]["lr"] = 30.0
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    finally:
        watch.close()
    return watch


def test_spike_is_reported_before_the_nan_and_the_nan_report_shows_the_norms():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NonFiniteError) as info:
            _diverging_run({})
    [spike] = [w for w in caught if issubclass(w.category, NonFiniteWarning)]  # a spike warns, never raises
    assert "gradient spike at step 9" in str(spike.message)
    report = info.value.report
    assert report.step == 16 and report.kind == "inf"
    norms = [n for _, n in report.grad_norms]
    assert norms[-1] > 1e20 and norms[-9] < 1 and norms[-8] > 100  # 0.66 (step 8) -> 242 (step 9) -> ...
    assert "clip them (torch.nn.utils.clip_grad_norm_)" in report.hint
    assert "242 (step 9) -> 5.14e+03 (step 10)" in str(report)


def test_record_mode_keeps_one_report_per_explosion():
    watch = _diverging_run({"mode": "record"})
    spikes = [r for r in watch.reports if r.phase == "explosion"]
    assert [(r.kind, r.step, r.module) for r in spikes] == [("explosion", 9, "")]
    assert "311x the median" in spikes[0].what and "clip" in spikes[0].hint
    first_nan = next(r for r in watch.reports if r.phase != "explosion")
    assert (first_nan.kind, first_nan.step) == ("inf", 16)


def test_no_spike_on_a_steady_run_or_on_unchecked_steps():
    assert _diverging_run({"mode": "record"}, steps=8).reports == []
    every = _diverging_run({"mode": "record", "every": 2}, steps=11)  # the jump at step 9 is seen at 10
    assert [(r.phase, r.step) for r in every.reports] == [("explosion", 10)]
    assert [s for s, _ in every.history.norms] == [0, 2, 4, 6, 8, 10]
