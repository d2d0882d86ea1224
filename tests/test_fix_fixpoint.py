"""Fixes that meet reach a fixed point: once TNL202's or TNL204's fix and TNL306's rewrite of the
calls leave `from torch.cuda.amp import ...` unused, its removal goes in too, and a second `--fix`
finds nothing (issue 21, item 7), through the installed command.

The import's removal used to be dropped: the function the other fix made clean is masked for
LibCST, and a masked last statement ended the file with lines LibCST does not reprint, so every
offset, and with them every fix of the file, was refused."""

import pytest

from tests.test_cli import run

AMP = """import torch
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler(init_scale=1024)


def step(model, x, y, loss_fn, optimizer):
    with autocast(dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
NORMALIZE = """

def unit_rows(x):
    h = torch.relu(x)
    return h / h.norm(dim=-1, keepdim=True)
"""
ROOT = """

def embedding_norm_loss(x):
    h = x - x.mean(dim=-1, keepdim=True)
    return torch.sqrt((h ** 2).sum(dim=-1))
"""


@pytest.mark.parametrize("other", [NORMALIZE, ROOT], ids=["TNL202", "TNL204"])
@pytest.mark.parametrize("trailing", ["", "\n\n"])
def test_the_import_left_unused_goes_and_a_second_fix_finds_nothing(tmp_path, other, trailing):
    path = tmp_path / "train.py"
    path.write_text(AMP + other + trailing)
    first = run("--no-cache", "--fix", "train.py", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    fixed = path.read_text()
    assert "torch.cuda.amp" not in fixed and 'GradScaler("cuda", init_scale=1024)' in fixed
    second = run("--no-cache", "--fix", "train.py", cwd=tmp_path)
    assert second.returncode == 0 and path.read_text() == fixed, second.stdout
    assert run("--no-cache", "train.py", cwd=tmp_path).returncode == 0
