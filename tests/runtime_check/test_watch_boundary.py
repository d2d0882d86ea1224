"""scope="boundary" (item 14): only the model's inputs, outputs, loss and parameter gradients are
checked, so a torch.compile'd model keeps its graph whole; scope="modules" breaks it after every
submodule. Compiled with the aot_eager backend (dynamo and AOTAutograd, no C++ compiler needed)."""

import pytest
import torch
from torch import nn

from torchnumlint.runtime_check import NonFiniteError, nan_watch
from tests.runtime_check import watch_models as wm


def _hooked(model):
    return [n for n, m in model.named_modules() if m._forward_hooks or m._forward_pre_hooks]


def _poison_at(model, step, opt_steps):
    """A training loop that sets `inp.weight[0, 0]` to NaN before step `step`."""
    x, y = wm.batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(opt_steps):
        if i == step:
            with torch.no_grad():
                dict(model.named_parameters())[_param_name(model)][0, 0] = float("nan")
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def _param_name(model):
    return next(n for n, _ in model.named_parameters() if n.endswith("inp.weight"))


def test_boundary_hooks_only_the_root_and_names_the_parameters():
    model = wm.Net()
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model, scope="boundary"):
            assert _hooked(model) == [""]
            _poison_at(model, 2, 4)
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.step) == ("forward", "nan", "", 2)
    assert report.what == "output" and report.nonfinite_params == ["inp.weight"]


def test_boundary_backward_names_the_parameter_gradient():
    """A backward-only NaN made by the loss (the founding KL case): seen at the model's output,
    with the parameter whose gradient it reaches."""
    from tests.runtime_check import founding_case as fc

    model = fc.Distiller()
    with nan_watch(model, scope="boundary", mode="record") as watch:
        fc.distill_loss(*model(torch.randn(2, 16))).backward()
    [report] = watch.reports
    assert (report.phase, report.module, report.what) == ("backward", "", "gradient w.r.t. output[1]")
    assert "outside any module" in report.hint
    assert report.nonfinite_grads == ["backbone.prompt_embeddings_state"]


def _graph_breaks(scope, steps=3):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(wm.Net(), backend="aot_eager")
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(compiled, scope=scope):
            _poison_at(compiled, 1, steps)
    return sum(torch._dynamo.utils.counters["graph_break"].values()), info.value.report


def test_compiled_model_boundary_keeps_the_graph_and_catches_the_nan():
    breaks, report = _graph_breaks("boundary")
    assert breaks == 0
    assert (report.phase, report.module, report.step) == ("forward", "", 1)
    assert report.module_class == "Net" and report.nonfinite_params == ["inp.weight"]  # no `_orig_mod.`


def test_compiled_model_modules_scope_breaks_the_graph():
    breaks, report = _graph_breaks("modules")
    assert breaks > 0
    assert (report.phase, report.module, report.step) == ("forward", "inp", 1)
