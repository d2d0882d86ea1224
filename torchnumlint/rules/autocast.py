"""The AMP vocabulary, in one place for both readers of it: the `ast` project pre-pass
(`torchnumlint/index.py`) and the LibCST rules (the mixed-precision family, `rules/amp.py`).

Plain data and functions over plain values, importable without libcst: what the qualified names
of autocast, GradScaler and custom_fwd/custom_bwd are, which `torch.cuda.amp` spellings are
deprecated and what replaces them, which dtypes are float16 or float32, and how a call of one of
them reads from its *shape*.

A call's shape is `CallShape(qual, pos, kw)`: the callee's qualified name through the imports and
its argument values, each reduced to the small value vocabulary below. Each reader builds shapes
from its own tree (`index._call_shape` from `ast`, `amp.call_shape` from LibCST) and hands them
here, so the two can only disagree about import resolution, never about what a call means:

- a string literal is a `str`, `True`/`False` a `bool`, a number a `float` (with a sign, and
  `float("inf")`, `float("-1e9")` read too);
- a dotted name is a `Dotted` holding its qualified name (`Dotted("torch.float16")`);
- anything else is None (unknown).

Measured with torch 2.13: `torch.autocast("cuda")` and `torch.cuda.amp.autocast()` default to
float16, `torch.autocast("cpu")` and `torch.cpu.amp.autocast()` to bfloat16; every
`torch.cuda.amp` spelling below (and `torch.cpu.amp.autocast`) raises a FutureWarning; the
GradScalers take `enabled` at position 5 (`torch.amp.GradScaler`, `ShardedGradScaler`: device
first), `torch.cuda.amp.GradScaler` at position 4.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterable, NamedTuple, Optional, Tuple

# float16's range, and what happens to a small eps there.
FP16_MAX = 65504.0
FP16_TINY = 6.1e-5  # the smallest normal float16
FP16_ROUNDS_TO_ZERO = 2.98e-8  # half the smallest subnormal: anything below is 0.0 in float16
FP16_INF_RECIPROCAL = 1.53e-5  # 1 / eps > 65504 below this: the reciprocal is Inf

FP16_DTYPES = frozenset({"torch.float16", "torch.half"})
FP32_DTYPES = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})

# Autocast context managers, by the device their spelling fixes (None: `device_type` is an argument),
# with their positional parameters.
GENERIC_AUTOCAST_PARAMS = ("device_type", "dtype", "enabled", "cache_enabled")
DEVICE_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")
AUTOCAST_GENERIC = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
AUTOCAST_CUDA = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST_CPU = frozenset({"torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast"})
AUTOCAST_ALL = AUTOCAST_GENERIC | AUTOCAST_CUDA | AUTOCAST_CPU
PARTIAL = frozenset({"functools.partial"})

# Loss scalers, each with the position of its `enabled` parameter.
GRAD_SCALERS: Dict[str, int] = {
    "torch.amp.GradScaler": 5,
    "torch.amp.grad_scaler.GradScaler": 5,
    "torch.GradScaler": 5,
    "torch.cuda.amp.GradScaler": 4,
    "torch.cuda.amp.grad_scaler.GradScaler": 4,
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 5,
    "torch.distributed.fsdp.ShardedGradScaler": 5,
}
# Loss scaling that a framework manages: apex sets a scaler up with amp.initialize.
SCALING_SETUP = frozenset({"apex.amp.initialize", "apex.amp.scale_loss"})

CUSTOM_FWD = frozenset(
    {"torch.amp.custom_fwd", "torch.amp.autocast_mode.custom_fwd", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.autocast_mode.custom_fwd"}
)
CUSTOM_BWD = frozenset(
    {"torch.amp.custom_bwd", "torch.amp.autocast_mode.custom_bwd", "torch.cuda.amp.custom_bwd", "torch.cuda.amp.autocast_mode.custom_bwd"}
)

# The deprecated `torch.cuda.amp` spellings and `torch.cpu.amp.autocast` (TNL306) and the
# `torch.amp` name replacing each (the device: `deprecated_device`).
DEPRECATED: Dict[str, str] = {
    **{qual: "torch.amp.autocast" for qual in AUTOCAST_CUDA | AUTOCAST_CPU},
    **{qual: "torch.amp.GradScaler" for qual in GRAD_SCALERS if qual.startswith("torch.cuda.amp.")},
    **{qual: "torch.amp.custom_fwd" for qual in CUSTOM_FWD if qual.startswith("torch.cuda.amp.")},
    **{qual: "torch.amp.custom_bwd" for qual in CUSTOM_BWD if qual.startswith("torch.cuda.amp.")},
}


def deprecated_device(qual: str) -> str:
    """The device a deprecated spelling fixes: "cpu" for `torch.cpu.amp.*`, else "cuda"."""
    return "cpu" if qual in AUTOCAST_CPU else "cuda"


class Dotted(NamedTuple):
    """A dotted name in a call's arguments, by its qualified name (`torch.float16`)."""

    qual: str


class CallShape(NamedTuple):
    """A call as the vocabulary reads it: qualified callee (None when unknown), positional values
    up to the first `*args`, keyword values (`**kwargs` left out)."""

    qual: Optional[str]
    pos: Tuple[object, ...]
    kw: Dict[str, object]


def call_shape(qual: Optional[str], arguments: Iterable[Tuple[Optional[str], str, object]]) -> CallShape:
    """The shape of a call from its arguments in source order, each `(keyword or None, star, value)`
    with `star` "", "*" or "**": positionals after a `*args` are not known by position."""
    pos = []
    kw: Dict[str, object] = {}
    starred = False
    for keyword, star, value in arguments:
        if star == "*":
            starred = True
        elif star == "**":
            continue
        elif keyword is not None:
            kw[keyword] = value
        elif not starred:
            pos.append(value)
    return CallShape(qual, tuple(pos), kw)


def number_literal(node: ast.AST) -> Optional[float]:
    """The value of a number literal in an `ast` expression: `1e-8`, `-1e9`, `+3`,
    `float("inf")`, `float("-1e9")`, `-float("inf")`; None for anything else (booleans included)."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return sign * float(node.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        try:
            return sign * float(node.args[0].value)
        except ValueError:
            return None
    return None


def argument_value(node: ast.AST, qual: Optional[str]) -> object:
    """An argument in the value vocabulary: `node` is its `ast` expression, `qual` its qualified
    name where it is a dotted name that the imports resolve (else None)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
        return node.value
    if qual is not None:
        return Dotted(qual)
    return number_literal(node)


def source_value(code: str, qual: Optional[str]) -> object:
    """`argument_value` of an argument given as source text (how a LibCST reader hands one over)."""
    try:
        node = ast.parse(f"(\n{code}\n)", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return argument_value(node, qual)


# ---------------------------------------------------------------------------------------------
# What a call means


def classify_autocast(shape: CallShape) -> Optional[Tuple[str, bool]]:
    """(device, opt_in) of an fp16 autocast call, else None (not an autocast, disabled, bfloat16,
    or a dtype or device that cannot be read). `opt_in`: `enabled=` is given and is not the
    literal True (`enabled=args.fp16`): the region is fp16 only when a flag says so."""
    if shape.qual in AUTOCAST_GENERIC:
        names: Tuple[str, ...] = GENERIC_AUTOCAST_PARAMS
        device: Optional[str] = None
    elif shape.qual in AUTOCAST_CUDA:
        names, device = DEVICE_AUTOCAST_PARAMS, "cuda"
    elif shape.qual in AUTOCAST_CPU:
        names, device = DEVICE_AUTOCAST_PARAMS, "cpu"
    else:
        return None
    args = dict(zip(names, shape.pos))
    args.update(shape.kw)
    if device is None:
        given = args.get("device_type")
        device = given if isinstance(given, str) or given is None else None
    if args.get("enabled", True) is False:
        return None
    opt_in = "enabled" in args and args["enabled"] is not True
    if "dtype" in args:
        dtype = args["dtype"]
        if not (isinstance(dtype, Dotted) and dtype.qual in FP16_DTYPES):
            return None  # bf16, fp32 or a dtype we cannot see: not known to be fp16
        return (device if isinstance(device, str) else "cuda"), opt_in
    if isinstance(device, str) and device.split(":")[0] == "cuda":
        return "cuda", opt_in  # CUDA autocast defaults to fp16 (CPU to bf16)
    return None


def is_other_autocast(shape: CallShape) -> bool:
    """An autocast that is not fp16 (disabled, bf16, CPU): what runs under it is not fp16."""
    return shape.qual in AUTOCAST_ALL and classify_autocast(shape) is None


def with_partial(shape: CallShape, partial: Optional[CallShape]) -> CallShape:
    """The shape of `ctx(...)` where `ctx = functools.partial(torch.autocast, ...)`: the
    partial's arguments first (`partial` is the shape of the `partial(...)` call itself)."""
    if partial is None or partial.qual not in PARTIAL or not partial.pos:
        return shape
    inner = partial.pos[0]
    qual = inner.qual if isinstance(inner, Dotted) else None
    return CallShape(qual, partial.pos[1:] + shape.pos, {**partial.kw, **shape.kw})


def is_cast_fp32(shape: CallShape) -> bool:
    """`custom_fwd(..., cast_inputs=torch.float32)`: the forward runs on float32 inputs."""
    value = shape.kw.get("cast_inputs")
    return shape.qual in CUSTOM_FWD and isinstance(value, Dotted) and value.qual in FP32_DTYPES


def is_enabled_scaler(shape: CallShape) -> bool:
    """Loss scaling set up: a GradScaler not built with `enabled=False`, or apex's
    `amp.initialize` / `amp.scale_loss`."""
    if shape.qual in SCALING_SETUP:
        return True
    where = GRAD_SCALERS.get(shape.qual or "")
    if where is None:
        return False
    enabled = shape.kw.get("enabled", shape.pos[where] if len(shape.pos) > where else True)
    return enabled is not False


# ---------------------------------------------------------------------------------------------
# float16 from the frameworks (regions the project index records besides torch's autocast)

ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
LIGHTNING_TRAINERS = frozenset(
    {
        "pytorch_lightning.Trainer",
        "pytorch_lightning.trainer.Trainer",
        "pytorch_lightning.trainer.trainer.Trainer",
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
        "lightning.pytorch.trainer.Trainer",
    }
)
LIGHTNING_RUNS = frozenset({"fit", "validate", "test", "predict"})
# What a LightningModule given to `trainer.fit(model)` runs under the Trainer's precision.
LIGHTNING_STEPS = ("", "training_step", "validation_step", "test_step", "predict_step")
DEEPSPEED_INIT = frozenset({"deepspeed.initialize"})
# Lightning's float16 precisions (2.x "16-mixed"; 1.x 16 / "16"); a number literal reads as a float.
LIGHTNING_FP16 = frozenset({16.0, "16", "16-mixed", "16-true"})


def accelerate_fp16(shape: CallShape) -> Optional[bool]:
    """An `Accelerator(...)` construction: True when `mixed_precision="fp16"`, False when it can
    be float16 only by what the code does not show (an argument, `accelerate config`: opt-in),
    None when it is not float16 (`"bf16"`, `"no"`) or not an Accelerator."""
    if shape.qual not in ACCELERATORS:
        return None
    value = shape.kw.get("mixed_precision", shape.pos[1] if len(shape.pos) > 1 else None)
    if isinstance(value, str):
        return True if value == "fp16" else None
    return False


def lightning_fp16(shape: CallShape) -> Optional[bool]:
    """A Lightning `Trainer(...)`: True for `precision="16-mixed"` / `16`, False for a precision
    the code does not show (opt-in), None for another literal or none (float32 by default)."""
    if shape.qual not in LIGHTNING_TRAINERS or "precision" not in shape.kw:
        return None
    value = shape.kw["precision"]
    if isinstance(value, (str, float)):
        return True if value in LIGHTNING_FP16 else None
    return False
