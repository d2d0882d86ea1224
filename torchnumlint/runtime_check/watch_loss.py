"""Where a backward was called from, and on what: the loss of the failing step.

A gradient hook runs inside `loss.backward()`; the thread that called it (the hook's own thread on
the CPU, the blocked caller on an accelerator, whose engine runs hooks on its own threads) still
has `Tensor.backward` / `torch.autograd.backward` on its stack, with the loss in its locals, and
the caller's frame above it: the file where the loss was built. Frames of PyTorch itself and of
the training drivers that call backward for the user (Lightning, accelerate, the Hugging Face
Trainer) are skipped, so the site named is the user's code.

The same frames hold what the loss read besides the model's outputs: a target, a label, a weight.
When the model's outputs are finite and the loss is not, a non-finite tensor there that carries no
gradient is data (`find_loss_data`), not the loss code: named by its variable and batch positions.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any, Iterator, List, Optional, Tuple

import torch

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
DRIVERS = ("lightning", "pytorch_lightning", "accelerate", "transformers")


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _driver_dirs() -> Tuple[str, ...]:
    """Source folders of PyTorch, of nan_watch itself (a replayed step's backward passes through
    its TorchFunctionMode) and of the imported training drivers."""
    dirs = [_TORCH_DIR, _HERE]
    for name in DRIVERS:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None) if module is not None else None
        if path:
            dirs.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(dirs)


@dataclass
class LossSite:
    """The tensor backward was called on (None when not found) and the caller's file and line."""

    loss: Optional[torch.Tensor]
    path: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.path else ""


def caller_frames(thread_id: int) -> Iterator[FrameType]:
    """The frames of thread `thread_id` (this one, or the caller blocked in backward), innermost first."""
    frame = sys._getframe(1) if thread_id == threading.get_ident() else sys._current_frames().get(thread_id)
    while frame is not None:
        yield frame
        frame = frame.f_back


def find_loss_site(thread_id: int) -> LossSite:
    """The loss and call site of the backward running now on behalf of thread `thread_id`."""
    drivers = _driver_dirs()
    loss: Optional[torch.Tensor] = None
    in_backward = False
    for frame in caller_frames(thread_id):
        code = frame.f_code
        path = os.path.abspath(code.co_filename)
        if code.co_name == "backward" and path.startswith(_TORCH_DIR):
            in_backward = True
            local = frame.f_locals
            candidate = local.get("self", local.get("tensors"))
            if isinstance(candidate, (tuple, list)) and len(candidate) == 1:
                candidate = candidate[0]
            if isinstance(candidate, torch.Tensor):
                loss = candidate
        elif in_backward and not path.startswith(drivers) and not code.co_filename.startswith("<"):
            return LossSite(loss, code.co_filename, frame.f_lineno)
    return LossSite(loss, "", 0)


def _loss_inputs(value: Any, prefix: str, depth: int = 0) -> Iterator[Tuple[str, torch.Tensor]]:
    """(label, tensor) for the floating tensors without a gradient in a local: tensor, tuple/list, dict."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and not value.requires_grad:
            yield prefix, value
    elif depth < 3 and isinstance(value, (tuple, list)) and len(value) <= 16:
        for i, v in enumerate(value):
            yield from _loss_inputs(v, f"{prefix}[{i}]", depth + 1)
    elif depth < 3 and isinstance(value, dict) and len(value) <= 64:
        for k, v in value.items():
            yield from _loss_inputs(v, f"{prefix}[{k!r}]", depth + 1)


def find_loss_data(thread_id: int, frames: int = 4) -> List[Tuple[str, torch.Tensor]]:
    """The non-finite tensors without a gradient (targets, labels, weights: data) in the locals
    of the code that called backward and of its `frames` - 1 callers, nearest first, each once:
    (variable, tensor). Called inside the backward of a non-finite loss, while those frames live."""
    found: List[Tuple[str, torch.Tensor]] = []
    seen = set()
    in_backward, user = False, 0
    for frame in caller_frames(thread_id):
        path = os.path.abspath(frame.f_code.co_filename)
        if frame.f_code.co_name == "backward" and path.startswith(_TORCH_DIR):
            in_backward = True
            continue
        if not in_backward or path.startswith((_TORCH_DIR, _HERE)) or frame.f_code.co_filename.startswith("<frozen"):
            continue
        for name, value in list(frame.f_locals.items()):
            for label, t in _loss_inputs(value, name):
                if id(t) not in seen and not bool(torch.isfinite(t.detach()).all()):
                    seen.add(id(t))
                    found.append((label, t))
        user += 1
        if user >= frames:
            break
    return found
