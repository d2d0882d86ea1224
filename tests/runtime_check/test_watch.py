"""nan_watch finds the founding KL NaN at the right parameter, in the backward and (after the
poisoned optimizer step) in the forward."""

import warnings

import pytest
import torch
from torch import nn

from torchnumlint.runtime_check import NanReport, NonFiniteError, NonFiniteWarning, nan_watch
from tests.runtime_check import founding_case as fc

PARAM = "backbone.prompt_embeddings_state"


def _step(model, x, opt=None):
    s1, s2 = model(x)
    loss = fc.distill_loss(s1, s2)
    loss.backward()
    if opt is not None:
        opt.step()
        opt.zero_grad()
    return loss


@pytest.fixture
def x():
    return torch.randn(2, 16, generator=torch.Generator().manual_seed(0))


def test_founding_case_backward_names_the_parameter(x):
    torch.manual_seed(0)
    model = fc.Distiller()
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model):
            s1, s2 = model(x)
            loss = fc.distill_loss(s1, s2)
            assert torch.isfinite(loss)  # the forward is finite: only the backward goes NaN
            loss.backward()
    report = info.value.report
    assert isinstance(info.value, FloatingPointError)
    assert report.phase == "backward"
    assert report.module == "backbone" and report.module_class == "Backbone"
    assert report.what == "gradient w.r.t. output[1]"
    assert report.nonfinite_grads == [PARAM]  # the encoder's gradients stay finite
    assert report.stats.nan == fc.VOCAB and report.stats.shape == (2, fc.VOCAB)  # row 0 is NaN
    # the forward value of s2 shows the spread that made softmax underflow
    label, value = report.inputs[0]
    assert label == "forward value of output[1]" and value.min == -200.0 and value.max == 0.0
    assert report.source.endswith("founding_case.py:%d" % _line_of("class Backbone"))
    assert "outside any module" in report.hint
    text = str(report)
    assert PARAM in text and "NaN 1000/2000" in text and "min -200" in text


def test_founding_case_param_grad_report(x):
    """Watching parameter gradients alone names the parameter itself."""
    model = fc.Distiller()
    with nan_watch(model, backward=False, forward=False, mode="record") as watch:
        _step(model, x)
    [report] = watch.reports
    assert report.phase == "param_grad" and report.name == PARAM
    assert report.module == "backbone" and report.what == "gradient of parameter"
    assert report.stats.nan == fc.VOCAB
    assert report.inputs[0][0] == "parameter value" and report.inputs[0][1].min == -200.0


def test_founding_case_forward_after_the_poisoned_step(x):
    """Step 0's NaN gradient reaches the parameter through SGD; step 1's forward is NaN at the
    module that owns it, and the report says which parameter is non-finite."""
    model = fc.Distiller()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _step(model, x, opt)  # unwatched: the parameter is now NaN in row 0
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model):
            model(x)
    report = info.value.report
    assert report.phase == "forward"
    assert report.module == "backbone" and report.what == "output[1]"
    assert report.nonfinite_params == [PARAM]
    assert report.stats.nan == fc.VOCAB
    assert "already non-finite" in report.hint
    assert report.inputs[0][0] == "input[0]" and report.inputs[0][1].all_finite


def test_record_mode_over_steps(x):
    model = fc.Distiller()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nan_watch(model, mode="record") as watch:
        for _ in range(3):
            _step(model, x, opt)
    phases = [(r.step, r.phase) for r in watch.reports]
    assert phases == [(0, "backward"), (1, "forward"), (1, "backward"), (2, "forward"), (2, "backward")]
    assert all(isinstance(r, NanReport) for r in watch.reports)
    assert watch.reports[1].nonfinite_params == [PARAM]


def test_warn_mode(x):
    model = fc.Distiller()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with nan_watch(model, mode="warn") as watch:
            _step(model, x)
    ours = [w for w in caught if issubclass(w.category, NonFiniteWarning)]
    assert len(ours) == 1 and PARAM in str(ours[0].message)
    assert len(watch.reports) == 1


def test_no_false_alarm_on_a_finite_run(x):
    model = fc.Distiller(spread=5.0)  # nothing underflows
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nan_watch(model) as watch:
        for _ in range(3):
            _step(model, x, opt)
    assert watch.reports == []


def test_forward_nan_inside_a_module_and_inf():
    model = nn.Sequential(nn.Linear(4, 4), fc.LogProbs())
    with torch.no_grad():
        model[1].proj.weight.zero_()
        model[1].proj.bias.copy_(torch.tensor([0.0] * 9 + [-200.0]))  # softmax -> 0 -> log = -inf
    with nan_watch(model, mode="record") as watch:
        model(torch.randn(3, 4))
    [report] = watch.reports
    assert report.phase == "forward" and report.module == "1" and report.module_class == "LogProbs"
    assert report.stats.nan == 0 and report.stats.neginf == 3 and report.stats.inf == 3
    assert "inside this module" in report.hint
    assert report.headline.startswith("Inf in forward")


def test_static_findings_of_the_module_file(x):
    pytest.importorskip("libcst")
    model = fc.Distiller()
    with nan_watch(model, mode="record") as watch:
        _step(model, x)
    findings = watch.reports[0].findings
    assert any("TNL101" in f and "founding_case.py:%d" % _line_of("return F.kl_div") in f for f in findings), findings
    with nan_watch(fc.Distiller(), mode="record", lint=False) as watch:
        _step(watch.model, x)
    assert watch.reports[0].findings == []


def test_every_n_steps_with_manual_step(x):
    model = fc.Distiller()
    watch = nan_watch(model, mode="record", every=2)
    for _ in range(4):
        _step(model, x)  # the parameter is never updated: every step has the NaN gradient
        model.zero_grad()
        watch.step()
    watch.close()
    assert sorted({r.step for r in watch.reports}) == [0, 2]


def test_every_n_steps_counts_optimizer_steps(x):
    """No watch.step(): the optimizer's steps advance the step (the NaN of step 0 poisons the
    parameter, so every later step has a NaN forward and backward)."""
    model = fc.Distiller()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nan_watch(model, mode="record", every=3) as watch:
        for _ in range(7):
            _step(model, x, opt)
    assert sorted({r.step for r in watch.reports}) == [0, 3, 6]


def test_close_removes_every_hook(x):
    model = fc.Distiller()
    watch = nan_watch(model)
    watch.close()
    _step(model, x)  # NaN gradient, but nothing is watching
    assert watch.reports == []
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_gradient_flowing_into_the_model_inputs():
    lin = nn.Linear(3, 1)
    x = torch.tensor([[0.0, 1.0, 2.0]], requires_grad=True)
    with nan_watch(lin, mode="record", param_grads=False) as watch:
        out = lin(x)
        torch.sqrt(out - out).sum().backward()  # d sqrt(0) = inf, times 0 -> NaN upstream
    assert watch.reports and watch.reports[0].phase == "backward"
    assert watch.reports[0].what == "gradient w.r.t. output"


def test_bad_arguments():
    with pytest.raises(ValueError):
        nan_watch(nn.Linear(2, 2), mode="explode")
    with pytest.raises(ValueError):
        nan_watch(nn.Linear(2, 2), every=0)


def _line_of(text):
    lines = open(fc.__file__).read().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)
