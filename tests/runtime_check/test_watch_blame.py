"""Who is blamed: a NaN made in a module's backward names that module (item 8), non-finite
inputs are a data fault named by argument and batch position (item 9), and a report carries the
static findings of every file on the failing path and of the loss's file (item 12)."""

import pytest
import torch
from torch import nn

from torchnumlint.runtime_check import NonFiniteError, nan_watch
from tests.runtime_check import watch_models as wm


def _sigmoid_loss(out):
    return -torch.log(torch.sigmoid(out)).mean()  # TNL104: the loss's own finding, in this file


class Wrapper(nn.Module):
    """A root defined in this file around a body defined in watch_models.py."""

    def __init__(self):
        super().__init__()
        self.body = wm.NormNet(dead=True)

    def forward(self, x):
        return self.body(x)


def test_backward_nan_is_blamed_on_the_module_whose_backward_made_it():
    """RowNorm's output gradient is finite and its input gradient NaN: RowNorm is blamed, not the
    ReLU that produced its input, and the hint does not say 'outside any module'."""
    torch.manual_seed(0)
    model = wm.NormNet(dead=True)
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model):
            loss = model(torch.randn(4, 3)).pow(2).mean()
            assert torch.isfinite(loss)
            loss.backward()
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.step) == ("backward", "nan", "norm", 0)
    assert report.module_class == "RowNorm" and report.what == "gradient w.r.t. input[0]"
    assert "created in this module's backward" in report.hint and "outside any module" not in report.hint
    assert report.nonfinite_grads == []  # the ReLU zeroes the NaN before any parameter


def test_nan_made_by_the_forward_code_between_submodules_names_the_holder():
    """A value no submodule consumes, turned NaN in the backward of the parent's own code."""

    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(3, 4)
            self.head = nn.Linear(1, 1)

        def forward(self, x):
            h = self.inp(x) * 0.0  # a zero row: the root of its sum of squares has a NaN derivative
            return self.head(torch.sqrt((h * h).sum(-1, keepdim=True)))

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.parent = Parent()

        def forward(self, x):
            return self.parent(x)

    model = Root()
    with nan_watch(model, mode="record") as watch:
        model(torch.randn(2, 3)).sum().backward()
    [report] = watch.reports
    assert (report.phase, report.module) == ("backward", "parent") and report.module_class.endswith("<locals>.Parent")
    assert report.what == "gradient w.r.t. `parent.inp` output" and "forward code of `parent`" in report.hint
    assert sorted(report.nonfinite_grads) == ["parent.inp.bias", "parent.inp.weight"]


def test_loss_made_nan_is_blamed_on_the_loss_with_its_line():
    model = nn.Linear(3, 1)
    with nan_watch(model, mode="record") as watch:
        out = model(torch.randn(2, 3))
        loss = torch.log(out - out - 1).sum()  # log of -1: NaN in the loss, finite model output
        loss.backward()  # the NaN loss
    [report] = watch.reports
    assert (report.phase, report.kind, report.module, report.name) == ("forward", "nan", "", "loss")
    assert report.loss_site == f"{__file__}:{_line_of('loss.backward()  # the NaN loss')}"
    assert "the loss code creates" in report.hint


def test_data_fault_names_the_argument_and_batch_positions():
    model = wm.Net()
    x, y = wm.batch()
    x[3, 1] = float("nan")
    x[6, 0] = float("inf")
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model):
            model(x)
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.name, report.step) == ("data", "data", "", "x", 0)
    assert report.what == "input `x`, batch positions [3, 6] of 8"
    assert report.stats.nan == 1 and report.stats.posinf == 1
    assert "data fault" in report.hint and report.findings == []


def test_data_fault_in_a_nested_batch_is_apart_from_module_faults():
    """Record mode: the data fault is the step's one report (the NaN the modules then see is the
    data's); the next step with clean data is checked again."""

    class DictModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(4, 2)

        def forward(self, batch, scale=1.0):
            return self.enc(batch["image"] * scale)

    model = DictModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    bad = {"image": torch.ones(5, 4), "label": torch.zeros(5, dtype=torch.long)}
    bad["image"][2] = float("nan")
    with nan_watch(model, mode="record") as watch:
        model(bad).sum().backward()
        opt.zero_grad()  # the NaN gradient is not applied
        opt.step()
        model(batch={"image": torch.ones(5, 4)}).sum().backward()
    [report] = watch.reports
    assert (report.phase, report.name, report.step) == ("data", "batch['image']", 0)
    assert report.what == "input `batch['image']`, batch positions [2] of 5"


def test_a_non_finite_regression_target_is_a_data_fault_with_its_rows():
    """The model's outputs are finite, the target is not: the target is named, with its rows, not
    "the loss code"."""
    model = wm.Net()
    x, y = wm.batch()
    y[3] = float("nan")
    y[5] = float("inf")
    with pytest.raises(NonFiniteError) as info:
        with nan_watch(model):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()  # the NaN target's loss
    report = info.value.report
    assert (report.phase, report.kind, report.name, report.step) == ("data", "data", "y", 0)
    assert report.what == "loss input `y`, batch positions [3, 5] of 8"
    assert report.stats.nan == 1 and report.stats.posinf == 1
    assert "data fault" in report.hint and "not the loss code" in report.hint
    assert report.loss_site.endswith(f"test_watch_blame.py:{_line_of('# the NaN target')}")


def test_a_non_finite_weight_in_a_batch_dict_is_a_data_fault():
    """A per-sample weight inside the batch dict of the training step, in record mode."""
    model = wm.Net()
    x, y = wm.batch()
    batch = {"x": x, "y": y, "weight": torch.ones(8, 1)}
    batch["weight"][2] = float("nan")
    with nan_watch(model, mode="record") as watch:
        loss = (batch["weight"] * (model(batch["x"]) - batch["y"]) ** 2).mean()
        loss.backward()
    [report] = watch.reports
    assert (report.phase, report.name) == ("data", "batch['weight']")
    assert report.what == "loss input `batch['weight']`, batch positions [2] of 8"


def test_findings_of_every_file_on_the_path_and_of_the_loss():
    pytest.importorskip("libcst")
    torch.manual_seed(0)
    model = Wrapper()
    with nan_watch(model, mode="record") as watch:
        _sigmoid_loss(model(torch.randn(4, 3))).backward()
    [report] = watch.reports
    assert report.module == "body.norm"
    models_file = "watch_models.py:%d" % _line_of("return torch.sqrt", wm.__file__)
    assert any(models_file in f and "TNL204" in f for f in report.findings), report.findings
    assert any(f"test_watch_blame.py:{_line_of('TNL104: the loss')}" in f and "TNL104" in f for f in report.findings), report.findings
    assert report.loss_site.endswith(f"test_watch_blame.py:{_line_of('_sigmoid_loss(model(torch.randn(4, 3)))')}")
    text = str(report)
    assert "torchnumlint findings on the failing path:" in text and "TNL204" in text


def _line_of(text, path=__file__):
    lines = open(path).read().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "_line_of" not in line)
