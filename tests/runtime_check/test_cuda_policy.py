"""CUDA's autocast policy on the CPU: each op gets the dtype CUDA autocast would give it, so a
mixed-precision reproduction confirmed here holds on a GPU, and one that holds only under CPU
autocast (which leaves exp and sum in float16) is not confirmed."""

import dataclasses

import torch
import torch.nn.functional as F

from torchnumlint import catalogue
from torchnumlint.runtime_check import cuda_policy, runner
from torchnumlint.runtime_check.context import Repro
from torchnumlint.runtime_check.oracles import CONFIRMED, NOT_REPRODUCED
from torchnumlint.runtime_check.repros import REPROS


def test_ops_get_the_dtype_cuda_autocast_gives_them():
    x = torch.randn(4, 4)
    with cuda_policy.cuda_autocast():
        product = x @ x  # matmul: float16 on CUDA
        assert product.dtype == torch.float16
        assert F.linear(x, x).dtype == torch.float16
        for upcast in (
            torch.exp(product),
            product.sum(),
            F.softmax(product, -1),
            product.pow(2),
            1 / product,
            torch.linalg.vector_norm(product),
            F.log_softmax(product, -1),
            product.log1p(),
        ):
            assert upcast.dtype == torch.float32  # CUDA's float32 list
        for kept in (
            product * product,
            product / 2,
            product + product,
            product.sqrt(),
            product.sigmoid(),
            product.masked_fill(product > 0, 1.0),
        ):
            assert kept.dtype == torch.float16  # run in the dtype they are given
        assert torch.exp(x.double()).dtype == torch.float64  # float64 is never cast
        assert torch.atan2(product, x).dtype == torch.float32  # promote to the widest
    assert (x @ x).dtype == torch.float32  # nothing outside the region


def test_gradients_flow_through_the_casts():
    # fixed, small entries: exp(x @ x) stays far below float16's 65504, so the float16 gradient of
    # the matmul is finite (a random draw can reach e**11 and overflow it, which is float16, not
    # the casts)
    x = torch.linspace(-1.0, 1.0, 9).reshape(3, 3).requires_grad_()
    with cuda_policy.cuda_autocast():
        y = torch.exp(x @ x).sum()
    y.backward()
    assert x.grad is not None and x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()


def test_custom_fwd_runs_an_fp32_island_and_custom_bwd_follows_the_forward():
    seen = {}

    class Square(torch.autograd.Function):
        @staticmethod
        @cuda_policy.cuda_custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, a):
            seen["forward"] = (a.dtype, (a @ a).dtype)
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @cuda_policy.cuda_custom_bwd
        def backward(ctx, grad):
            seen["backward"] = cuda_policy.emulating()
            (a,) = ctx.saved_tensors
            return 2 * a * grad

    x = torch.randn(4, 4, requires_grad=True)
    with cuda_policy.cuda_autocast():
        out = Square.apply(x @ x)  # a float16 input, cast back to float32 for the island
    out.sum().backward()
    assert seen["forward"] == (torch.float32, torch.float32)  # cast, and no autocast inside
    assert seen["backward"] is False and out.dtype == torch.float32


def test_port_rewrites_every_spelling_of_cuda_autocast():
    text = (
        'with torch.autocast("cuda"):\n'
        'with torch.amp.autocast(device_type="cuda", dtype=torch.float16):\n'
        "with torch.cuda.amp.autocast():\n"
        '@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
        '@torch.amp.custom_bwd(device_type="cuda")\n'
        's = torch.amp.GradScaler("cuda")\n'
    )
    ported = cuda_policy.port(text)
    assert ported.count("_tnl_cuda_autocast(") == 3
    assert "_tnl_custom_fwd(device_type=" in ported and "_tnl_custom_bwd(device_type=" in ported
    assert 'GradScaler("cpu")' in ported and "torch.autocast" not in ported
    assert cuda_policy.uses_cuda_autocast(text) and not cuda_policy.uses_cuda_autocast('torch.autocast("cpu")')


# The founding TNL301 example: a custom Function normalising with exp under autocast. Under CPU
# autocast its exp runs in float16 and overflows; CUDA runs exp and sum in float32, so on a GPU
# there is nothing to see. A reproduction built on it must not be confirmed.
EXP_ONLY = """
import torch


class ExpNormalize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        e = torch.exp(x)
        out = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return out * (grad - (grad * out).sum(-1, keepdim=True))


def step(x, w):
    with torch.autocast("cuda"):
        return ExpNormalize.apply(x @ w)
"""


def test_a_hazard_of_the_cpu_policy_alone_is_not_reproduced():
    # scores x @ w of spread ~ +-16: exp overflows float16 (past 11.1), not float32 (past 88.7)
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(0))
    w = torch.randn(16, 16, generator=torch.Generator().manual_seed(1))
    ns: dict = {}
    exec(EXP_ONLY.replace('torch.autocast("cuda")', 'torch.autocast("cpu", dtype=torch.float16)'), ns)
    assert not torch.isfinite(ns["step"](x, w)).all()  # CPU autocast: exp in float16 overflows

    info = catalogue.load()["TNL301"]
    example = dataclasses.replace(info.examples[0], bad=EXP_ONLY)
    rules = {"TNL301": dataclasses.replace(info, examples=(example,))}
    first = REPROS["TNL301"][0]
    repro = Repro(
        "TNL301", "NF", "step", ("autocast",), reference=first.reference, grad=("x", "w"), adversarial=lambda ctx: {"x": x, "w": w}
    )
    results = runner.verify(
        select=["TNL301"], device="cpu", rules=rules, repros={"TNL301": (repro,)}, fixer=lambda _: runner.real_fixes(info)[:1]
    )
    run = [r for r in results if r.oracle == "NF"]
    assert [r.verdict for r in run] == [NOT_REPRODUCED], run[0].evidence
    assert "stays finite" in run[0].reason


def test_the_tnl301_example_reproduces_under_the_cuda_policy():
    results = runner.verify(select=["TNL301"], device="cpu")
    run = [r for r in results if r.oracle == "NF" and r.example == 1]
    assert [r.verdict for r in run] == [CONFIRMED], [(r.reason, r.evidence) for r in run]
    assert "CUDA's op policy" in run[0].evidence[0]
