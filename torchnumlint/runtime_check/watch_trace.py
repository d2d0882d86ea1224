"""Where each operation of a replayed step was created, and whose backward went non-finite first.

nan_watch's hooks sit on module boundaries: a NaN made by the loss code outside the model (a KL in
a helper file) is blamed on "the code that consumes the model's output", and the report can name
only the line that called backward. Naming the operation needs the creation site of every op of
the forward, which `torch.autograd.detect_anomaly` records (a Python stack per op) on every step;
`StepTrace` records it only while one step is replayed (`NanWatch.replay`), so a run pays nothing
until it has an incident to explain.

While active, a `TorchFunctionMode` sees every torch call of the forward (an `F.kl_div` as one
call: the mode is off inside it). The graph nodes its output created (the call's own, and those of
the ops inside it, found by walking `next_functions` down to nodes already seen) get the call's
site: the first frame outside PyTorch and nan_watch, as file, line and function. Each node gets a
hook; in the backward, the first node whose incoming gradients are finite and whose outgoing ones
are not is the culprit: the operation whose derivative is infinite at these values.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch.overrides import TorchFunctionMode

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True)
class OpSite:
    """A torch call of the forward and the user's line that made it."""

    op: str
    path: str
    line: int
    function: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def describe(self) -> str:
        return f"{self.op} at {self.where} (in {self.function})"


def _call_site(op: str) -> Optional[OpSite]:
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith((_TORCH_DIR, _HERE)) or frame.f_code.co_filename.startswith("<frozen")):
            return OpSite(op, frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def _finite(grads: Sequence[Optional[torch.Tensor]]) -> bool:
    """Every floating gradient finite? One sum per gradient (a NaN or Inf makes it non-finite);
    the exact check only where the sum is not finite (it may overflow on finite values)."""
    for g in grads:
        if g is None or not g.is_floating_point():
            continue
        g = g.detach()
        if not bool(torch.isfinite(g.sum())) and not bool(torch.isfinite(g).all()):
            return False
    return True


class StepTrace(TorchFunctionMode):
    """Records the creation site of every graph node of the forward run under it, and finds the
    first node whose backward turns finite gradients into non-finite ones (`culprit`)."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: Dict[Any, OpSite] = {}
        self.culprit: Optional[Any] = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if torch.is_grad_enabled():
            self._record(func, out)
        return out

    def _record(self, func, out) -> None:
        roots = [
            t.grad_fn
            for t in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(t, torch.Tensor) and t.grad_fn is not None and t.grad_fn not in self.sites
        ]
        if not roots:
            return
        site = _call_site(getattr(func, "__name__", str(func)))
        if site is None:
            return
        stack = roots
        while stack:
            node = stack.pop()
            if node is None or node in self.sites or type(node).__name__ == "AccumulateGrad":
                continue
            self.sites[node] = site
            node.register_hook(self._hook(node))
            stack.extend(n for n, _ in node.next_functions if n is not None)

    def _hook(self, node):
        def hook(grad_inputs, grad_outputs):
            # the gradients it passes on first: almost always finite, so one check per node
            if self.culprit is None and not _finite(grad_inputs) and _finite(grad_outputs):
                self.culprit = node
            return None

        return hook

    @property
    def culprit_site(self) -> Optional[OpSite]:
        return self.sites.get(self.culprit) if self.culprit is not None else None

    def failing_path(self, loss: Optional[torch.Tensor]) -> List[OpSite]:
        """The sites of the ops from the loss down to the culprit (the code that built the loss
        and the op that failed), each once, loss side first."""
        if self.culprit is None or loss is None or loss.grad_fn is None:
            return [self.culprit_site] if self.culprit_site else []
        parent: Dict[Any, Any] = {loss.grad_fn: None}
        stack = [loss.grad_fn]
        while stack:
            node = stack.pop()
            if node is self.culprit:
                break
            for nxt, _ in node.next_functions:
                if nxt is not None and nxt not in parent:
                    parent[nxt] = node
                    stack.append(nxt)
        chain: List[Any] = []
        link: Any = self.culprit if self.culprit in parent else None
        while link is not None:
            chain.append(link)
            link = parent[link]
        sites: List[Optional[OpSite]] = [self.sites[n] for n in reversed(chain) if n in self.sites] or [self.culprit_site]
        return list(dict.fromkeys(s for s in sites if s is not None))
