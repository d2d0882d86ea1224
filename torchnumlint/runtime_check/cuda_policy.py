"""CUDA's autocast policy, run on any device: a mixed-precision claim proved on the CPU holds on CUDA.

CPU autocast casts far less than CUDA autocast: it leaves `exp`, `log`, `sum` and `softmax` in the
low-precision dtype, where CUDA runs them in float32. A reproduction run under CPU autocast can
therefore overflow where a GPU would not, and "confirm" a hazard that does not exist on the device
the rule is about. So an example's `torch.autocast("cuda")` is not ported to CPU autocast; it is
run under `cuda_autocast`, which applies CUDA's op lists itself, op by op, to tensors on any device:

- ops CUDA autocasts to float16 (matmul, linear, convolutions, ...) get float16 inputs;
- ops CUDA autocasts to float32 (exp, log, pow, sum, softmax, norms, losses, ...) get float32
  inputs and so give float32 outputs;
- ops that promote (addcmul, atan2, ...) get their inputs at the widest dtype;
- every other op (`*`, `/`, `+`, sqrt, masked_fill, ...) runs in the dtype of its inputs.

The lists are torch's "CUDA Ops that can autocast to float16 / float32" (docs/amp.rst), by op name
as `__torch_function__` sees it. Casts are differentiable, as autocast's are, and the backward runs
outside the region (as CUDA's does on its own thread). `cuda_custom_fwd` / `cuda_custom_bwd` give
`torch.amp.custom_fwd(device_type="cuda", cast_inputs=...)` / `custom_bwd` their CUDA meaning under
the emulation: the forward's floating inputs are cast and it runs with autocast off; the backward
runs as the forward did. A `device_type` other than "cuda" leaves CUDA autocast alone, as torch
does: a fix that says `custom_fwd(device_type="cpu", cast_inputs=torch.float32)` still runs its
forward in float16 under CUDA autocast, and fails. Imports torch only.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from typing import Any, Callable, Iterator, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

TO_FLOAT16 = frozenset(
    """
__matmul__ __rmatmul__ addbmm addmm addmv addr baddbmm bmm chain_matmul multi_dot linalg_multi_dot conv1d
conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d gru_cell lstm_cell matmul mm mv prelu
rnn_tanh_cell rnn_relu_cell linear einsum
""".split()
)

TO_FLOAT32 = frozenset(
    """
__pow__ __rpow__ pow __rdiv__ __rtruediv__ acos asin binary_cross_entropy_with_logits cosh
cosine_embedding_loss cdist cosine_similarity cross_entropy cumprod cumsum dist erfinv exp expm1
group_norm hinge_embedding_loss kl_div l1_loss layer_norm log log_softmax log10 log1p log2
margin_ranking_loss mse_loss multilabel_margin_loss multi_margin_loss nll_loss norm normalize pdist
poisson_nll_loss prod reciprocal rsqrt sinh smooth_l1_loss soft_margin_loss softmax softmin softplus
sum renorm tan triplet_margin_loss logsumexp linalg_vector_norm vector_norm linalg_norm
frobenius_norm nuclear_norm huber_loss rms_norm
""".split()
)

PROMOTE = frozenset("addcdiv addcmul atan2 bilinear cross dot grid_sample index_put scatter_add tensordot".split())

_state = threading.local()


def emulating() -> bool:
    """Is the CUDA policy on here (inside `cuda_autocast`, outside a custom_fwd's fp32 island)?"""
    return getattr(_state, "depth", 0) > 0 and not getattr(_state, "suspended", 0)


def _eligible(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


def _cast_all(args: Any, dtype: torch.dtype) -> Any:
    return tree_map(lambda v: v.to(dtype) if _eligible(v) and v.dtype != dtype else v, args)


def _widest(args: Any) -> Optional[torch.dtype]:
    widest = None
    for leaf in torch.utils._pytree.tree_leaves(args):
        if _eligible(leaf) and (widest is None or torch.finfo(leaf.dtype).bits > torch.finfo(widest).bits):
            widest = leaf.dtype
    return widest


class _Policy(TorchFunctionMode):
    """Casts each op's inputs as CUDA autocast would, when the policy is on."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if emulating() and kwargs.get("dtype") is None and kwargs.get("out") is None:
            name = getattr(func, "__name__", "")
            if name.endswith("_") and not name.startswith("__"):
                pass  # in-place ops are not autocast (torch's op eligibility)
            elif name in TO_FLOAT16:
                args, kwargs = _cast_all((args, kwargs), torch.float16)
            elif name in TO_FLOAT32:
                args, kwargs = _cast_all((args, kwargs), torch.float32)
            elif name in PROMOTE:
                widest = _widest((args, kwargs))
                if widest is not None:
                    args, kwargs = _cast_all((args, kwargs), widest)
        return func(*args, **kwargs)


@contextlib.contextmanager
def cuda_autocast(
    device_type: str = "cuda", dtype: Optional[torch.dtype] = None, enabled: bool = True, cache_enabled: Optional[bool] = None
) -> Iterator[None]:
    """`torch.autocast("cuda")` as CUDA runs it, on the tensors' own device (float16 only: the
    default of CUDA autocast and the only dtype the rules' examples use)."""
    if dtype not in (None, torch.float16):
        raise ValueError(f"the CUDA-policy emulation runs float16 autocast, not {dtype}")
    if not enabled:
        with _suspended():
            yield
        return
    _state.depth = getattr(_state, "depth", 0) + 1
    saved, _state.suspended = getattr(_state, "suspended", 0), 0
    try:
        with _Policy():
            yield
    finally:
        _state.depth -= 1
        _state.suspended = saved


@contextlib.contextmanager
def _suspended() -> Iterator[None]:
    _state.suspended = getattr(_state, "suspended", 0) + 1
    try:
        yield
    finally:
        _state.suspended -= 1


def cuda_custom_fwd(fwd: Optional[Callable] = None, *, device_type: str = "cuda", cast_inputs: Optional[torch.dtype] = None) -> Callable:
    """`torch.amp.custom_fwd(device_type=..., cast_inputs=...)` under the emulation: for "cuda"
    with `cast_inputs`, floating inputs are cast to it and the forward runs with autocast off; for
    another device the forward runs as it would without the decorator (under the policy)."""
    if fwd is None:
        return functools.partial(cuda_custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        on = emulating()
        casts = cast_inputs is not None and device_type == "cuda"  # another device's custom_fwd: not CUDA's
        args[0]._tnl_fwd_emulated = on and not casts and device_type == "cuda"
        if not (on and casts):
            return fwd(*args, **kwargs)
        with _suspended():
            return fwd(*_cast_all(args, cast_inputs), **_cast_all(kwargs, cast_inputs))

    return forward


def cuda_custom_bwd(bwd: Optional[Callable] = None, *, device_type: str = "cuda") -> Callable:
    """`torch.amp.custom_bwd(device_type=...)` under the emulation: the backward runs under the
    policy exactly when the forward ran under it with a CUDA custom_fwd (another device's
    custom_bwd does not re-enter CUDA autocast)."""
    if bwd is None:
        return functools.partial(cuda_custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(*args, **kwargs):
        region = cuda_autocast() if getattr(args[0], "_tnl_fwd_emulated", False) else contextlib.nullcontext()
        with region:
            return bwd(*args, **kwargs)

    return backward


_CUSTOM = re.compile(r"torch\.(?:amp|cuda\.amp)\.custom_(fwd|bwd)\b")
NAMESPACE = {"_tnl_cuda_autocast": cuda_autocast, "_tnl_custom_fwd": cuda_custom_fwd, "_tnl_custom_bwd": cuda_custom_bwd}


def uses_cuda_autocast(text: str) -> bool:
    return bool(re.search(r'autocast\(\s*(?:device_type\s*=\s*)?"cuda"|cuda\.amp\.autocast\(', text))


def port(text: str) -> str:
    """An example's CUDA autocast, run under the emulation: `torch.autocast("cuda", ...)`,
    `torch.amp.autocast(device_type="cuda", ...)` and `torch.cuda.amp.autocast(...)` become
    `cuda_autocast(...)`; custom_fwd/custom_bwd their emulated forms; a CUDA GradScaler
    (`GradScaler("cuda")`, `torch.cuda.amp.GradScaler(...)`, `torch.amp.GradScaler()` of the default
    device) scales on the CPU. The names are bound by `NAMESPACE`."""
    text = re.sub(r'torch\.(?:amp\.)?autocast\(\s*(?:device_type\s*=\s*)?"cuda"\s*,?\s*', "_tnl_cuda_autocast(", text)
    text = re.sub(r"torch\.cuda\.amp\.autocast\(", "_tnl_cuda_autocast(", text)
    text = _CUSTOM.sub(lambda m: f"_tnl_custom_{m.group(1)}", text)
    text = re.sub(r'GradScaler\(\s*(?:device\s*=\s*)?"cuda"', 'GradScaler("cpu"', text)
    # torch.cuda.amp.GradScaler(...) (positional arguments after the device's) and a torch.amp
    # GradScaler of the default device ("cuda") scale on the CPU too: a machine without CUDA would
    # disable them, and a right fix would fail as a wrong one
    text = re.sub(r"torch\.(?:cuda\.)?amp\.GradScaler\(\s*\)", 'torch.amp.GradScaler("cpu")', text)
    text = re.sub(r"torch\.cuda\.amp\.GradScaler\((?=\s*\S)", 'torch.amp.GradScaler("cpu", ', text)
    text = re.sub(r"torch\.amp\.GradScaler\((?=\s*[a-z_]+\s*=)(?!\s*device\s*=)", 'torch.amp.GradScaler("cpu", ', text)
    return text
