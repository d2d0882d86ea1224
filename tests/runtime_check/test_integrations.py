"""The framework callbacks (extras `lightning` and `hf`) on tiny CPU models with the real
libraries: a NaN planted in a named submodule at a known optimizer step is caught there, by name
and step, by a callback that is all the user adds; a clean run reports nothing; the hooks are gone
after the run, also after a raise. Skipped only where the library is not installed (CI installs
both through the `dev` extra)."""

import ast
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from torchnumlint.runtime_check import NonFiniteError

PACKAGE = Path(__file__).resolve().parents[2] / "torchnumlint"
FRAMEWORKS = {"lightning", "pytorch_lightning", "transformers", "accelerate"}


class Poison(nn.Module):
    """Identity, except that its `at`-th training forward (0-based) returns NaN: a fault planted
    at a known step (one forward per optimizer step in these runs)."""

    def __init__(self, at=None):
        super().__init__()
        self.at = at
        self.calls = 0

    def forward(self, x):
        if not self.training:
            return x
        call, self.calls = self.calls, self.calls + 1
        return x * float("nan") if call == self.at else x


def _hooked(model: nn.Module) -> list:
    """Modules of `model` that still carry a forward hook or pre-hook."""
    return [n for n, m in model.named_modules() if m._forward_hooks or m._forward_pre_hooks]


def test_only_the_integration_modules_import_a_framework():
    """The runtime extra stays torch-only: each framework is imported by its own module alone."""
    owners = {"lightning": {"lightning", "pytorch_lightning"}, "hf": {"transformers", "accelerate"}}
    for path in PACKAGE.rglob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add(node.module.split(".")[0])
        allowed = owners.get(path.stem, set()) if path.parent.name == "integrations" else set()
        assert imported & FRAMEWORKS <= allowed, path


# ---- PyTorch Lightning -----------------------------------------------------------------------


def _lightning_run(callback, poison_at=None, steps=4, **trainer_options):
    pl = pytest.importorskip("lightning.pytorch", reason="the `lightning` extra is not installed")

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(4, 8)
            self.unstable = Poison(poison_at)
            self.out = nn.Linear(8, 1)

        def forward(self, x):
            return self.out(self.unstable(torch.relu(self.inp(x))))

    class Regressor(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.body = Body()

        def forward(self, x):
            return self.body(x)

        def training_step(self, batch, batch_idx):  # never calls watch.step(): steps come from the optimizer
            x, y = batch
            return F.mse_loss(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def train_dataloader(self):
            g = torch.Generator().manual_seed(0)
            data = torch.utils.data.TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g))
            return torch.utils.data.DataLoader(data, batch_size=4)

    torch.manual_seed(0)
    model = Regressor()
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
        **trainer_options,
    )
    return trainer, model


def _lightning_callback(**options):
    lightning_integration = pytest.importorskip(
        "torchnumlint.runtime_check.integrations.lightning", reason="the `lightning` extra is not installed"
    )
    return lightning_integration.NanWatchCallback(**options)


def test_lightning_raises_at_the_planted_module_and_step():
    callback = _lightning_callback()
    trainer, model = _lightning_run(callback, poison_at=2)
    with pytest.raises(NonFiniteError) as info:
        trainer.fit(model)
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.step) == ("forward", "nan", "body.unstable", 2)
    assert trainer.global_step == 2  # the optimizer steps 0 and 1 ran, step 2 did not
    assert "inside this module's forward" in report.hint
    assert callback.reports == [report]
    assert callback.watch is None and _hooked(model) == []  # on_exception removed the hooks


def test_lightning_record_mode_keeps_training_and_skips_unchecked_steps():
    """every=2: the NaN planted at step 3 (unchecked) reaches every parameter through SGD; the
    first checked step after it, 4, finds the forward of the first layer non-finite and says its
    parameters are. Steps advance with no watch.step() in the training code."""
    callback = _lightning_callback(mode="record", every=2)
    trainer, model = _lightning_run(callback, poison_at=3, steps=6)
    trainer.fit(model)
    assert trainer.global_step == 6
    first = callback.reports[0]
    assert (first.phase, first.module, first.step) == ("forward", "body.inp", 4)
    assert first.nonfinite_params == ["body.inp.weight", "body.inp.bias"]
    assert {r.step for r in callback.reports} <= {4}  # step 5 is not checked; nothing before 4 was seen
    assert _hooked(model) == []


def test_lightning_fp16_scaler_overflow_steps_are_not_incidents():
    """precision 16-mixed with a GradScaler whose first scales overflow fp16: the scaler skips
    those steps and halves its scale, as designed. The callback hands the trainer's scaler to the
    watch, so the default raise mode lets the healthy run finish."""
    from lightning.pytorch.plugins.precision import MixedPrecision

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**20)
    callback = _lightning_callback()
    trainer, model = _lightning_run(callback, steps=8, plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)])
    trainer.fit(model)
    assert scaler.get_scale() == 2.0**15  # five overflow steps were skipped
    assert trainer.global_step == 8 and callback.reports == []


def test_lightning_clean_run_reports_nothing():
    callback = _lightning_callback()
    trainer, model = _lightning_run(callback)
    trainer.fit(model)
    assert trainer.global_step == 4 and callback.reports == [] and _hooked(model) == []


# ---- Hugging Face Trainer --------------------------------------------------------------------


def _hf_run(callback, tmp_path, poison_at=None, steps=4):
    transformers = pytest.importorskip("transformers", reason="the `hf` extra is not installed")
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)  # built from a config: nothing is downloaded
    model.transformer.h[1].mlp.act = nn.Sequential(model.transformer.h[1].mlp.act, Poison(poison_at))
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 32, (32, 12), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    return trainer, model


def _hf_callback(**options):
    hf_integration = pytest.importorskip("torchnumlint.runtime_check.integrations.hf", reason="the `hf` extra is not installed")
    return hf_integration.NanWatchCallback(**options)


def test_hf_raises_at_the_planted_module_and_step(tmp_path):
    callback = _hf_callback()
    trainer, model = _hf_run(callback, tmp_path, poison_at=2)
    try:
        with pytest.raises(NonFiniteError) as info:
            trainer.train()
    finally:
        callback.close()
    report = info.value.report
    assert (report.phase, report.kind, report.module, report.step) == ("forward", "nan", "transformer.h.1.mlp.act.1", 2)
    assert trainer.state.global_step == 2
    assert "inside this module's forward" in report.hint
    assert callback.reports == [report] and _hooked(model) == []


def test_hf_record_mode_names_the_module_and_trains_on(tmp_path):
    callback = _hf_callback(mode="record")
    trainer, model = _hf_run(callback, tmp_path, poison_at=1)
    trainer.train()
    assert trainer.state.global_step == 4
    first = callback.reports[0]
    assert (first.phase, first.module, first.step) == ("forward", "transformer.h.1.mlp.act.1", 1)
    assert all(r.step >= 1 for r in callback.reports)
    assert _hooked(model) == []  # on_train_end removed the hooks


def test_hf_clean_run_reports_nothing(tmp_path):
    callback = _hf_callback()
    trainer, model = _hf_run(callback, tmp_path)
    trainer.train()
    assert trainer.state.global_step == 4 and callback.reports == [] and _hooked(model) == []
