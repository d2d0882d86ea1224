"""nan_watch: find where the first NaN/Inf of a training run comes from.

    from torchnumlint.runtime_check import nan_watch

    with nan_watch(model) as watch:          # mode="raise" (default), "warn" or "record"
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()                  # raises NonFiniteError at the first NaN/Inf
            opt.step(); opt.zero_grad()

What it watches (hooks only; the model is not changed):

- forward: the output of every submodule (forward hooks). The first non-finite output is reported
  as it happens, innermost module first, so the report names the module that created it.
- backward: the gradient arriving at every module output (tensor hooks registered on the outputs
  during the forward, so the gradient flowing out of the next module back into this one) and the
  gradient flowing out of the model into its inputs.
- param_grad: the gradient of every parameter (`param.register_hook`), named by its qualified name
  (`backbone.prompt_embeddings_state`).

Inf counts as well as NaN (`torch.autograd.detect_anomaly` looks at backward NaN only, and records
a stack trace for every op of the forward, which makes it slow).

A report (`NanReport`) carries the phase, the step, the module's qualified name, its class and
source file:line, the shape, NaN / +Inf / -Inf counts and min/max/mean/std of the finite values of
the offending tensor; the statistics of the inputs that produced it (forward: the module's inputs;
backward: the forward value of the output whose gradient went bad; param_grad: the parameter); the
other parameters whose gradients are non-finite in the same backward; a hint on where the value was
created; and, when the linter is installed, torchnumlint's static findings in the module's source
file.

Backward reports are issued when the backward pass ends (one report per backward, the first event,
with the full list of parameters whose gradients went non-finite); forward reports at once on the
CPU. On an accelerator the finiteness flags stay on the device and are read once per forward (when
the outermost module returns) and once per backward, so watching costs no synchronisation per
module; the gradients of a checked backward are then held until that backward ends (use
`every=N` to bound the cost on large models). On the CPU only non-finite gradients are held.

Modes: "raise" raises NonFiniteError (a FloatingPointError; `.report` holds the NanReport) from
`model(x)` or from `loss.backward()`; "warn" issues a NonFiniteWarning and goes on; "record" only
appends to `watch.reports`. Every mode appends to `watch.reports`. In warn/record mode at most one
report per phase per step is made (a NaN that persists does not flood), `max_reports` in all.

Steps and `every=N`: only steps 0, N, 2N, ... are checked; the hooks of the other steps return at
once. A step begins at each call of the watched model's own forward, unless you call
`watch.step()` at the end of each training step yourself; from the first call on, only `step()`
advances the step (use this with gradient accumulation, or when several forwards make one step).
"""

from __future__ import annotations

import inspect
import math
import os
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

MODES = ("raise", "warn", "record")


class NonFiniteError(FloatingPointError):
    """A NaN or Inf was found; `.report` is the NanReport."""

    def __init__(self, report: "NanReport") -> None:
        super().__init__(str(report))
        self.report = report


class NonFiniteWarning(RuntimeWarning):
    pass


@dataclass
class TensorStats:
    shape: Tuple[int, ...]
    dtype: str
    numel: int
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    finite: int = 0
    min: Optional[float] = None
    max: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None

    @property
    def inf(self) -> int:
        return self.posinf + self.neginf

    @property
    def all_finite(self) -> bool:
        return self.nan == 0 and self.inf == 0

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorStats":
        t = t.detach()
        stats = cls(tuple(t.shape), str(t.dtype).replace("torch.", ""), t.numel())
        if t.numel() == 0 or not (t.is_floating_point() or t.is_complex()):
            return stats
        if t.is_complex():
            t = torch.view_as_real(t)
        f = t.to(torch.float64)
        stats.nan = int(torch.isnan(f).sum())
        stats.posinf = int((f == math.inf).sum())
        stats.neginf = int((f == -math.inf).sum())
        finite = f[torch.isfinite(f)]
        stats.finite = finite.numel()
        if finite.numel():
            stats.min, stats.max = float(finite.min()), float(finite.max())
            stats.mean = float(finite.mean())
            stats.std = float(finite.std(correction=0))
        return stats

    def describe(self) -> str:
        shape = "x".join(map(str, self.shape)) or "scalar"
        parts = [f"{self.dtype}[{shape}]"]
        if self.nan:
            parts.append(f"NaN {self.nan}/{self.numel}")
        if self.posinf:
            parts.append(f"+Inf {self.posinf}/{self.numel}")
        if self.neginf:
            parts.append(f"-Inf {self.neginf}/{self.numel}")
        if self.finite:
            parts.append(
                f"finite {self.finite}: min {self.min:.4g} max {self.max:.4g} mean {self.mean:.4g} std {self.std:.4g}"
            )
        elif self.numel:
            parts.append("no finite value")
        return ", ".join(parts)

    def as_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in ("shape", "dtype", "numel", "nan", "posinf", "neginf", "finite",
                                              "min", "max", "mean", "std")}


@dataclass
class NanReport:
    phase: str  # "forward", "backward" or "param_grad"
    step: int
    name: str  # qualified name of what went non-finite: a module, or a parameter
    module: str  # qualified name of the module ("" is the watched model itself)
    module_class: str
    source: str  # file:line of the module's class
    what: str  # "output[1]", "gradient w.r.t. output[0]", "gradient of parameter"
    stats: TensorStats
    inputs: List[Tuple[str, TensorStats]] = field(default_factory=list)
    nonfinite_params: List[str] = field(default_factory=list)
    nonfinite_grads: List[str] = field(default_factory=list)
    hint: str = ""
    findings: List[str] = field(default_factory=list)

    @property
    def headline(self) -> str:
        kind = "NaN" if self.stats.nan else "Inf"
        where = f"`{self.name}`" if self.name else "the watched model"
        return f"{kind} in {self.phase} at step {self.step}: {self.what} of {where} ({self.module_class}, {self.source})"

    def __str__(self) -> str:
        lines = [self.headline, f"  value: {self.stats.describe()}"]
        for label, stats in self.inputs:
            lines.append(f"  {label}: {stats.describe()}")
        if self.nonfinite_params:
            lines.append("  non-finite parameters: " + ", ".join(self.nonfinite_params))
        if self.nonfinite_grads:
            lines.append("  parameters with non-finite gradients: " + ", ".join(self.nonfinite_grads))
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        if self.findings:
            lines.append("  torchnumlint findings in " + self.source.rsplit(":", 1)[0] + ":")
            lines.extend(f"    {f}" for f in self.findings)
        return "\n".join(lines)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "phase": self.phase, "step": self.step, "name": self.name, "module": self.module,
            "module_class": self.module_class, "source": self.source, "what": self.what,
            "stats": self.stats.as_dict(), "inputs": [[label, s.as_dict()] for label, s in self.inputs],
            "nonfinite_params": list(self.nonfinite_params), "nonfinite_grads": list(self.nonfinite_grads),
            "hint": self.hint, "findings": list(self.findings),
        }


def _tensors(value: Any, prefix: str, depth: int = 0) -> Iterator[Tuple[str, torch.Tensor]]:
    """(label, tensor) for the floating tensors inside an output: tensor, tuple/list, dict."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            yield prefix, value
    elif depth < 4 and isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{prefix}[{i}]", depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for k, v in value.items():
            yield from _tensors(v, f"{prefix}[{k!r}]", depth + 1)


def _arg_tensors(args: Sequence[Any], kwargs: Optional[Dict[str, Any]]) -> Iterator[Tuple[str, torch.Tensor]]:
    """(label, tensor) for a call's floating tensor arguments: input[0], input['mask'], ..."""
    for i, a in enumerate(args):
        yield from _tensors(a, f"input[{i}]")
    for k, v in (kwargs or {}).items():
        yield from _tensors(v, f"input[{k!r}]")


def _flag(t: torch.Tensor) -> torch.Tensor:
    """0-dim bool, True when `t` may hold a NaN/Inf: one reduction, no sync. The sum of a tensor
    with a NaN or an Inf is non-finite; a false alarm (a finite sum that overflows) is ruled out by
    the exact check before any report."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    s = t.sum(dtype=torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.sum()
    return ~torch.isfinite(s)


def _has_nonfinite(t: torch.Tensor) -> bool:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    return not bool(torch.isfinite(t).all())


_SOURCE_CACHE: Dict[type, Tuple[str, int]] = {}


def _class_source(cls: type) -> Tuple[str, int]:
    if cls not in _SOURCE_CACHE:
        try:
            path = inspect.getsourcefile(cls) or inspect.getfile(cls)
            line = inspect.getsourcelines(cls)[1]
        except (TypeError, OSError):
            path, line = "<unknown>", 0
        _SOURCE_CACHE[cls] = (path, line)
    return _SOURCE_CACHE[cls]


_FINDINGS_CACHE: Dict[str, List[str]] = {}


def static_findings(path: str) -> List[str]:
    """torchnumlint's findings (default rules) in `path`, when the linter is installed; else []."""
    if path in _FINDINGS_CACHE:
        return _FINDINGS_CACHE[path]
    result: List[str] = []
    try:
        from torchnumlint.engine import lint_text  # lazy: libcst is needed only here
        from torchnumlint.rules.registry import all_rules

        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            rules = [r for r in all_rules() if r.default]
            for finding in lint_text(path, text, rules):
                result.append(f"{os.path.basename(path)}:{finding.line}:{finding.col}: {finding.code} {finding.message}")
    except ImportError:
        result = []
    except Exception:  # the linter failed on this file: the report goes out without findings
        result = []
    _FINDINGS_CACHE[path] = result
    return result


@dataclass
class _Event:
    phase: str
    flag: Optional[torch.Tensor]
    tensor: Any  # the tensor to check (or a weakref to it for backward values)
    build: Callable[[], NanReport]


class NanWatch:
    """Hooks on `model` that catch the first NaN/Inf; see the module docstring."""

    def __init__(
        self,
        model: nn.Module,
        mode: str = "raise",
        every: int = 1,
        forward: bool = True,
        backward: bool = True,
        param_grads: bool = True,
        lint: bool = True,
        max_reports: int = 100,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if every < 1:
            raise ValueError("every must be >= 1")
        self.model = model
        self.mode = mode
        self.every = every
        self.lint = lint
        self.max_reports = max_reports
        self.reports: List[NanReport] = []
        self.step_index = 0
        self._manual_steps = False
        self._forward_seen = False
        self._active = True
        self._reported: Dict[Tuple[int, str], bool] = {}
        self._pending_forward: List[_Event] = []
        self._pending_backward: List[_Event] = []
        self._callback_queued = False
        self._handles: List[Any] = []
        self._names: Dict[int, str] = {}
        self._param_owner: Dict[int, Tuple[str, nn.Module]] = {}
        self._closed = False
        self._watch_backward = backward

        for name, module in model.named_modules():
            self._names[id(module)] = name
            for pname, p in module.named_parameters(recurse=False):
                full = f"{name}.{pname}" if name else pname
                self._param_owner.setdefault(id(p), (full, module))
            if forward or backward:
                self._handles.append(module.register_forward_hook(self._forward_hook, with_kwargs=True))
        self._handles.append(model.register_forward_pre_hook(self._root_pre_hook, with_kwargs=True))
        if param_grads:
            for full, p in model.named_parameters():
                if p.requires_grad:
                    self._handles.append(p.register_hook(self._param_hook(full, p)))
        self._check_forward = forward

    # ---- the public surface ------------------------------------------------------------------

    def __enter__(self) -> "NanWatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
        finally:
            self.close()

    def step(self) -> None:
        """End of a training step: checks what is pending, then advances the step counter (from
        the first call on, model forwards no longer advance it)."""
        self.flush()
        self._manual_steps = True
        self._advance()

    def flush(self) -> None:
        """Read the pending device flags now (automatic at the end of each forward and backward)."""
        self._flush_forward()
        self._flush_backward()

    def close(self) -> None:
        """Remove every hook."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._pending_forward.clear()
        self._pending_backward.clear()
        self._closed = True

    @property
    def checking(self) -> bool:
        """Whether the current step is checked (step_index % every == 0)."""
        return self._active

    # ---- steps -------------------------------------------------------------------------------

    def _advance(self) -> None:
        self.step_index += 1
        self._active = self.step_index % self.every == 0

    def _root_pre_hook(self, module, args, kwargs):
        if not self._manual_steps:
            if self._forward_seen:
                self._flush_backward()
                self._advance()
            self._forward_seen = True
        if self._active and self._watch_backward and torch.is_grad_enabled():
            for label, t in _arg_tensors(args, kwargs):
                if t.requires_grad:
                    self._watch_grad(t, module, label, "gradient w.r.t. " + label)
        return None

    # ---- forward -----------------------------------------------------------------------------

    def _forward_hook(self, module, args, kwargs, output):
        if not self._active:
            return None
        outputs = list(_tensors(output, "output"))
        if self._check_forward and not self._reported.get((self.step_index, "forward")):
            for label, t in outputs:
                flag = _flag(t)
                build = self._forward_builder(module, label, t, args, kwargs)
                if flag.device.type == "cpu":
                    if bool(flag) and _has_nonfinite(t):
                        self._emit(build())
                        break
                else:
                    self._pending_forward.append(_Event("forward", flag, t, build))
        if self._watch_backward and torch.is_grad_enabled():
            for label, t in outputs:
                if t.requires_grad:
                    self._watch_grad(t, module, label, "gradient w.r.t. " + label)
        if module is self.model:
            self._flush_forward()
        return None

    def _forward_builder(self, module, label, t, args, kwargs) -> Callable[[], NanReport]:
        def build() -> NanReport:
            inputs = [(lab, TensorStats.of(x)) for lab, x in _arg_tensors(args, kwargs)]
            bad_inputs = any(not s.all_finite for _, s in inputs)
            bad_params = [self._param_owner.get(id(p), (n, None))[0]
                          for n, p in module.named_parameters(recurse=False) if _has_nonfinite(p)]
            if bad_params:
                hint = ("the module's own parameters are already non-finite: an earlier optimizer step "
                        "applied a NaN/Inf gradient (watch the backward of earlier steps)")
            elif bad_inputs:
                hint = ("its inputs are already non-finite: the value was created before this module, "
                        "outside any watched module's output (in the caller's code)")
            else:
                hint = "its inputs and parameters are finite: the NaN/Inf is created inside this module's forward"
            return self._report("forward", module, self._names.get(id(module), ""), label,
                                TensorStats.of(t), inputs, hint, nonfinite_params=bad_params)

        return build

    def _flush_forward(self) -> None:
        events, self._pending_forward = self._pending_forward, []
        first = _first_flagged(events)
        if first is not None:
            self._emit(first.build())

    # ---- backward ----------------------------------------------------------------------------

    def _watch_grad(self, t: torch.Tensor, module: nn.Module, label: str, what: str) -> None:
        ref = weakref.ref(t)
        name = self._names.get(id(module), "")
        step = self.step_index

        def hook(grad):
            if grad is None or self._closed:
                return None
            self._queue_end_of_backward()

            def build() -> NanReport:
                value = ref()
                inputs = [(f"forward value of {label}", TensorStats.of(value))] if value is not None else []
                hint = ("the gradient arriving here is already non-finite and no watched module further "
                        "down the graph saw it: it is created by the code that consumes this "
                        f"{'output' if 'output' in label else 'input'} outside any module (typically the loss)")
                return self._report("backward", module, name, what, TensorStats.of(grad), inputs, hint, step=step)

            self._observe_backward(_Event("backward", _flag(grad), grad.detach(), build))
            return None

        t.register_hook(hook)

    def _param_hook(self, full: str, p: torch.Tensor):
        owner_name, owner = self._param_owner.get(id(p), (full, self.model))
        module_name = self._names.get(id(owner), "")

        def hook(grad):
            if not self._active or grad is None or self._closed:
                return None
            self._queue_end_of_backward()

            def build() -> NanReport:
                hint = ("the gradients arriving at the module's outputs are finite: the NaN/Inf is created "
                        "in this module's own backward (an op whose derivative is infinite at these values)")
                return self._report("param_grad", owner, full, "gradient of parameter", TensorStats.of(grad),
                                    [("parameter value", TensorStats.of(p))], hint, module_name=module_name)

            event = _Event("param_grad", _flag(grad), grad.detach(), build)
            event.param = full  # type: ignore[attr-defined]
            self._observe_backward(event)
            return None

        return hook

    def _observe_backward(self, event: _Event) -> None:
        """Keep a backward event for the end-of-backward check. On the CPU the flag is read at
        once and only non-finite gradients are kept; on an accelerator every flag (and its
        gradient) is kept until the end of the backward, which reads all flags in one transfer."""
        if event.flag.device.type == "cpu":
            if not bool(event.flag):
                return
            event.flag = torch.ones((), dtype=torch.bool)
        self._pending_backward.append(event)

    def _queue_end_of_backward(self) -> None:
        if not self._callback_queued:
            self._callback_queued = True
            try:
                torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            except RuntimeError:  # not inside a backward: checked at the next flush instead
                self._callback_queued = False

    def _end_of_backward(self) -> None:
        self._callback_queued = False
        self._flush_backward()

    def _flush_backward(self) -> None:
        events, self._pending_backward = self._pending_backward, []
        if not events:
            return
        flags = torch.stack([e.flag.to(events[0].flag.device) for e in events]).cpu().tolist()
        flagged = [e for e, f in zip(events, flags) if f and _has_nonfinite(e.tensor)]
        if not flagged:
            return
        report = flagged[0].build()
        report.nonfinite_grads = [e.param for e in flagged if e.phase == "param_grad"]  # type: ignore[attr-defined]
        if report.phase == "param_grad":
            report.nonfinite_grads = [n for n in report.nonfinite_grads if n != report.name]
        self._emit(report)

    # ---- reports -----------------------------------------------------------------------------

    def _report(self, phase, module, name, what, stats, inputs, hint, nonfinite_params=(), step=None,
                module_name=None) -> NanReport:
        path, line = _class_source(type(module))
        findings = static_findings(path) if self.lint else []
        return NanReport(
            phase=phase, step=self.step_index if step is None else step, name=name,
            module=self._names.get(id(module), "") if module_name is None else module_name,
            module_class=type(module).__qualname__, source=f"{path}:{line}", what=what, stats=stats,
            inputs=list(inputs), nonfinite_params=list(nonfinite_params), hint=hint, findings=findings,
        )

    def _emit(self, report: NanReport) -> None:
        key = (report.step, "forward" if report.phase == "forward" else "backward")
        if self.mode != "raise" and (self._reported.get(key) or len(self.reports) >= self.max_reports):
            return
        self._reported[key] = True
        self.reports.append(report)
        if self.mode == "raise":
            self._pending_forward.clear()
            self._pending_backward.clear()
            raise NonFiniteError(report)
        if self.mode == "warn":
            warnings.warn(str(report), NonFiniteWarning, stacklevel=3)


def _first_flagged(events: Sequence[_Event]) -> Optional[_Event]:
    if not events:
        return None
    flags = torch.stack([e.flag.to(events[0].flag.device) for e in events]).cpu().tolist()
    for event, flagged in zip(events, flags):
        if flagged and _has_nonfinite(event.tensor):
            return event
    return None


def nan_watch(model: nn.Module, **options) -> NanWatch:
    """Watch `model` for the first NaN/Inf: `with nan_watch(model) as watch: ...`, or
    `watch = nan_watch(model); ...; watch.close()`. Options are NanWatch's; see the module docstring."""
    return NanWatch(model, **options)
