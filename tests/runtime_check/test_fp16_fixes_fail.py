"""The runtime side of fp16 (issue 17 item 4): verify runs an example's CUDA autocast under CUDA's
policy on the CPU, so a fix must hold under CUDA's meaning of what it writes. A `custom_fwd` for
another device leaves CUDA autocast on (the fix fails); a GradScaler turned off scales nothing
(the fix fails) while one written in any spelling of the CUDA scaler scales on the CPU (the fix
holds)."""

import dataclasses

import pytest
import torch

from tests.runtime_check.test_mutations import Mutation, _mutated_fixer
from torchnumlint import catalogue
from torchnumlint.runtime_check import cuda_policy, runner
from torchnumlint.runtime_check.context import ReproContext
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED
from torchnumlint.runtime_check.repros.mixed_precision import fp16_without_grad_scaler

RULES = catalogue.load()


def test_custom_fwd_for_the_cpu_leaves_cuda_autocast_on():
    """TNL301's fix with `device_type="cpu"`: under CUDA autocast its forward still gets float16
    inputs, `gram * gram` overflows, and verify fails the fix."""
    mutation = Mutation("custom_fwd for the cpu", "TNL301", 'custom_fwd(device_type="cuda"', 'custom_fwd(device_type="cpu"')
    results = runner.verify(select=["TNL301"], device="cpu", fixer=_mutated_fixer(mutation))
    runs = [r for r in results if r.example == 1 and r.oracle != "FIX"]
    assert runs and all(r.verdict == FIX_FAILED for r in runs), [(r.verdict, r.reason) for r in runs]


def test_custom_fwd_for_the_cpu_runs_under_the_policy():
    """The emulated decorator: a CUDA custom_fwd casts to float32, a CPU one casts nothing."""
    seen = {}

    def forward(ctx, x):
        seen["dtype"] = (x @ x).dtype
        return x

    class Ctx:
        pass

    for device, dtype in (("cuda", torch.float32), ("cpu", torch.float16)):
        wrapped = cuda_policy.cuda_custom_fwd(device_type=device, cast_inputs=torch.float32)(forward)
        with cuda_policy.cuda_autocast():
            wrapped(Ctx(), torch.ones(2, 2))
        assert seen["dtype"] == dtype, device


def _scaler_check(text):
    info = RULES["TNL302"]
    mutated = dataclasses.replace(info, good=(text,) + tuple(info.good[1:]))
    ctx = ReproContext(mutated, fp16_without_grad_scaler.REPRO, torch.device("cpu"), "autocast")
    return fp16_without_grad_scaler.REPRO.custom(ctx)


@pytest.mark.parametrize(
    "scaler, verdict",
    [
        ('torch.amp.GradScaler("cuda")', CONFIRMED),
        ("torch.cuda.amp.GradScaler()", CONFIRMED),
        ("torch.amp.GradScaler(init_scale=2.0 ** 16)", CONFIRMED),
        ('torch.amp.GradScaler("cuda", enabled=False)', FIX_FAILED),
        ("torch.cuda.amp.GradScaler(enabled=False)", FIX_FAILED),
    ],
)
def test_a_scaler_turned_off_fails_without_cuda(scaler, verdict):
    good = RULES["TNL302"].good[0]
    assert 'torch.amp.GradScaler("cuda")' in good
    assert _scaler_check(good.replace('torch.amp.GradScaler("cuda")', scaler)).verdict == verdict


@pytest.mark.parametrize(
    "text, ported",
    [
        ("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cpu")'),
        ("torch.amp.GradScaler()", 'torch.amp.GradScaler("cpu")'),
        ("torch.cuda.amp.GradScaler(65536.0, enabled=amp)", 'torch.amp.GradScaler("cpu", 65536.0, enabled=amp)'),
        ("torch.amp.GradScaler(enabled=amp)", 'torch.amp.GradScaler("cpu", enabled=amp)'),
        ('torch.amp.GradScaler(device="cuda")', 'torch.amp.GradScaler("cpu")'),
        ('torch.amp.GradScaler("cpu")', 'torch.amp.GradScaler("cpu")'),
    ],
)
def test_port_scales_every_cuda_scaler_on_the_cpu(text, ported):
    assert cuda_policy.port(text) == ported
