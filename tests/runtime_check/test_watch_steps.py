"""Steps are counted by the optimizer's steps or by watch.step(), never both; every=N follows them
(item 11)."""

import torch
from torch import nn

from torchnumlint.runtime_check import nan_watch
from tests.runtime_check import watch_models as wm


def test_optimizer_steps_advance_without_watch_step():
    model = wm.Net(at=3)
    with nan_watch(model, mode="record") as watch:
        wm.train(model, 5)
        assert watch.step_index == 5
    first = watch.reports[0]
    assert (first.phase, first.kind, first.module, first.step) == ("forward", "nan", "unstable", 3)


def test_every_n_follows_optimizer_steps():
    """The NaN planted at step 3 (unchecked with every=2) poisons every parameter through SGD; the
    first checked step after it, 4, sees it."""
    model = wm.Net(at=3)
    with nan_watch(model, mode="record", every=2) as watch:
        wm.train(model, 6)
    assert watch.reports[0].step == 4 and watch.reports[0].module == "inp"
    assert {r.step for r in watch.reports} == {4}  # step 5 is not checked


def test_watch_step_after_or_before_the_optimizer_counts_once():
    for order in ("after", "before"):
        model = wm.Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = wm.batch()
        watch = nan_watch(model)
        for _ in range(3):
            nn.functional.mse_loss(model(x), y).backward()
            if order == "before":
                watch.step()
            opt.step()
            if order == "after":
                watch.step()
        watch.close()
        assert watch.step_index == 3, order


def test_watch_step_alone_with_gradient_accumulation():
    """Once watch.step() is called, only it advances: here one watch step per micro-batch, an
    optimizer step every second one."""
    model = wm.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = wm.batch()
    with nan_watch(model) as watch:
        for micro in range(4):
            nn.functional.mse_loss(model(x), y).backward()
            if micro % 2:
                opt.step()
                opt.zero_grad()
            watch.step()
    assert watch.step_index == 4


def test_other_optimizers_do_not_advance_and_close_removes_the_hook():
    model, other = wm.Net(), nn.Linear(2, 2)
    opt_other = torch.optim.SGD(other.parameters(), lr=0.1)
    watch = nan_watch(model)
    other(torch.ones(1, 2)).sum().backward()
    opt_other.step()
    assert watch.step_index == 0
    wm.train(model, 1)
    assert watch.step_index == 1
    watch.close()
    wm.train(model, 1)
    assert watch.step_index == 1
