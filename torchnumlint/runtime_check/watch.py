"""nan_watch: find where the first NaN/Inf of a training run comes from.

    from torchnumlint.runtime_check import nan_watch

    with nan_watch(model) as watch:          # mode="raise" (default), "warn" or "record"
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()                  # raises NonFiniteError at the first NaN/Inf
            opt.step(); opt.zero_grad()      # the optimizer's step advances watch's step

What it watches (hooks only; the model is not changed):

- data: the model's inputs (the root module's forward arguments, nested in tuples, lists and
  dicts). A non-finite input is a data fault, named by argument and batch position, and the rest
  of that step is not reported (its NaNs are the data's). So is a non-finite target, label or
  weight: when the model's outputs are finite and the loss is not, a tensor without a gradient in
  the code that called backward (`watch_loss.find_loss_data`) is named with its rows.
- forward: the output of every submodule (forward hooks). The first non-finite output is reported
  as it happens, innermost module first, so the report names the module that created it. The loss
  (the tensor `backward` is called on) is checked too: finite model outputs and a non-finite loss
  name the loss code.
- backward: the gradient arriving at every module output and flowing out of it into its inputs
  (tensor hooks registered during the forward). The first non-finite gradient of a backward is
  blamed on the module whose backward turned a finite gradient into a non-finite one: the module
  that consumed the tensor (its output gradient was finite), or, for a tensor no submodule
  consumed, the forward code of the module that holds it, or the loss code outside the model.
- param_grad: the gradient of every parameter (`param.register_hook`), named by its qualified
  name (`backbone.prompt_embeddings_state`).
- explosion: the global gradient norm of each checked step (`watch_history.py`); a spike against
  the run's recent history is reported before any NaN (never raised: it warns in raise mode), and
  every report shows the last norms, so "12 -> 295 -> 2e4 -> NaN" is visible.
- scaler: under a GradScaler (`scaler=`, or found on the stack that called backward), non-finite gradients of a backward
  whose loss is finite are the scaler's overflow steps: counted (`watch.scaler.skips`), not
  reported; as many checked backwards in a row as halve the scaler's initial scale to 1
  (`max_skips` to override) is a scale collapse, an incident (`watch_scaler.py`).

Inf counts as well as NaN (`torch.autograd.detect_anomaly` looks at backward NaN only, and records
a stack trace for every op of the forward, which makes it slow).

A report (`NanReport`, `watch_report.py`) carries the phase, kind, step, rank, the blamed module's
qualified name (as in the unwrapped model: no DDP `module.` prefix), class and source file:line,
the statistics of the offending tensor and of what produced it, the parameters that are (or whose
gradients are) non-finite, the last global gradient norms, the line that called backward, a hint,
and, when the linter is installed, torchnumlint's static findings in every file that defines a
module on the failing path (the blamed module and its ancestors) and in the file that called
backward.

Backward reports are issued when the backward pass ends (one per backward); forward reports at
once on the CPU. On an accelerator the finiteness flags stay on the device and are read once per
forward (when the outermost module returns) and once per backward, with the gradient norm, so
watching costs no synchronisation per module; the gradients of a checked backward are then held
until that backward ends (use `every=N` to bound the cost on large models).

Replay (`watch.replay(step_fn, *batch)`, `watch_trace.py`): hooks on module boundaries cannot
tell which operation of the loss code made a NaN gradient. Replaying the failing step records the
creation site of every op of that one forward (detect_anomaly does it for every step) and names
the first operation whose backward turned finite gradients non-finite, with its line
(`report.operation`: a KL in a helper file), and lints every project file from the loss down to it.

Modes: "raise" raises NonFiniteError (a FloatingPointError; `.report` holds the NanReport) from
`model(x)` or from `loss.backward()`; "warn" issues a NonFiniteWarning and goes on; "record" only
appends to `watch.reports`. Every mode appends to `watch.reports`. In warn/record mode at most one
report per phase per step is made (a NaN that persists does not flood), `max_reports` in all.

Scope: "modules" (default) hooks every submodule. "boundary" checks only the model's inputs and
outputs, the loss, the gradients at the model's boundary and the parameter gradients: no hook runs
inside the model, so `nan_watch(torch.compile(model), scope="boundary")` keeps the compiled graph
whole (scope="modules" puts a data-dependent check after every submodule, which breaks a compiled
graph at each one). A report then names the parameter, not the submodule that created the value.

Steps and `every=N` (`watch_steps.py`): the step advances at each step of an optimizer holding the
model's parameters (also in Lightning or Hugging Face code that never calls `watch.step()`), at a
step the GradScaler skipped, or, once you call `watch.step()`, at your calls alone. Only steps
0, N, 2N, ... are checked; the hooks of the other steps return at once.

Distributed (`watch_dist.py`): a DistributedDataParallel/FSDP-wrapped model is named as the
unwrapped one, every report has its `.rank`, and in raise mode the ranks agree on an incident at
the end of each checked backward, so every rank raises NonFiniteError with the faulting rank's
report instead of the others hanging in their next collective.
"""

from __future__ import annotations

import inspect
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

from torchnumlint.runtime_check import watch_dist
from torchnumlint.runtime_check.watch_history import NormHistory, total_norm
from torchnumlint.runtime_check.watch_loss import LossSite, caller_frames, find_loss_data, find_loss_site
from torchnumlint.runtime_check.watch_report import (
    NanReport,
    NonFiniteError,
    NonFiniteWarning,
    TensorStats,
    class_source,
    path_findings,
)
from torchnumlint.runtime_check.watch_scaler import ScalerWatch
from torchnumlint.runtime_check.watch_steps import StepCounter
from torchnumlint.runtime_check.watch_trace import StepTrace

__all__ = ["nan_watch", "NanWatch", "NanReport", "NonFiniteError", "NonFiniteWarning", "TensorStats", "MODES", "SCOPES"]

MODES = ("raise", "warn", "record")
SCOPES = ("modules", "boundary")
CLIP_HINT = (
    "the global gradient norm grew steeply over the last checked steps: the gradients exploded "
    "before going non-finite; clip them (torch.nn.utils.clip_grad_norm_) or lower the learning rate"
)


def _tensors(value: Any, prefix: str, depth: int = 0) -> Iterator[Tuple[str, torch.Tensor]]:
    """(label, tensor) for the floating tensors inside a value: tensor, tuple/list, dict."""
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


def _named_inputs(forward: Callable, args: Sequence[Any], kwargs: Dict[str, Any]) -> Iterator[Tuple[str, torch.Tensor]]:
    """(label, tensor) for the model's inputs named by `forward`'s parameters: x, batch['image'],
    args[2]; positions when the signature does not bind."""
    try:
        bound = inspect.signature(forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        yield from _arg_tensors(args, kwargs)
        return
    for name, value in bound.items():
        yield from _tensors(value, name)


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


def _bad_rows(t: torch.Tensor, limit: int = 8) -> Tuple[List[int], int]:
    """The batch positions (indices along dim 0) holding a NaN/Inf, the first `limit` of them, and
    the batch size."""
    if t.dim() == 0:
        return [], 1
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    rows = (~torch.isfinite(t)).reshape(t.shape[0], -1).any(1).nonzero().flatten()
    return rows[:limit].tolist(), t.shape[0]


@dataclass
class _Grad:
    """A tensor whose gradient is watched: who made it (watched modules that returned it,
    innermost first) and who took it as an input (module, that module's label for it)."""

    ref: "weakref.ref[torch.Tensor]"
    label: str
    step: int
    producers: List[nn.Module] = field(default_factory=list)
    consumers: List[Tuple[nn.Module, str]] = field(default_factory=list)


@dataclass
class _Event:
    phase: str  # "forward", "backward" or "param_grad"
    flag: torch.Tensor
    tensor: torch.Tensor
    build: Callable[[], NanReport]
    param: str = ""


class NanWatch:
    """Hooks on `model` that catch the first NaN/Inf; see the module docstring."""

    def __init__(
        self,
        model: nn.Module,
        mode: str = "raise",
        every: int = 1,
        scaler: Optional[torch.amp.GradScaler] = None,
        scope: str = "modules",
        forward: bool = True,
        backward: bool = True,
        param_grads: bool = True,
        lint: bool = True,
        max_reports: int = 100,
        max_skips: Optional[int] = None,
        spike: float = 10.0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
        self.model = model
        self.mode = mode
        self.scope = scope
        self.lint = lint
        self.max_reports = max_reports
        self.reports: List[NanReport] = []
        self.counter = StepCounter(every, model.parameters())
        self.scaler = ScalerWatch(scaler, max_skips)
        self.history = NormHistory(spike=spike)
        self._check_forward = forward
        self._watch_backward = backward
        self._params = [p for p in model.parameters() if p.requires_grad]
        self._reported: Dict[Tuple[int, str], bool] = {}
        self._held: Optional[NanReport] = None  # distributed raise mode: the incident awaiting agreement
        self._pending_forward: List[_Event] = []
        self._pending_backward: List[_Event] = []
        self._records: Dict[int, _Grad] = {}
        self._loss: Optional[LossSite] = None
        self._trace: Optional[StepTrace] = None  # set while a step is replayed (`replay`)
        self._loss_flag: Optional[torch.Tensor] = None
        self._thread = threading.get_ident()
        self._callback_queued = False
        self._closed = False
        self._handles: List[Any] = []
        self._names: Dict[int, str] = {}
        self._by_name: Dict[str, nn.Module] = {}
        self._param_owner: Dict[int, Tuple[str, nn.Module]] = {}

        for raw, module in model.named_modules():
            name = watch_dist.user_name(raw, model)
            self._names[id(module)] = name
            self._by_name[name] = module  # a wrapper's child shares its name and wins: the user's class
            for pname, p in module.named_parameters(recurse=False):
                self._param_owner.setdefault(id(p), (f"{name}.{pname}" if name else pname, module))
        hooked = model.modules() if scope == "modules" else [model]
        if forward or backward:
            for module in hooked:
                self._handles.append(module.register_forward_hook(self._forward_hook, with_kwargs=True))
        self._handles.append(model.register_forward_pre_hook(self._root_pre_hook, with_kwargs=True))
        if param_grads:
            for p in self._params:
                self._handles.append(p.register_hook(self._param_hook(p)))

    # ---- the public surface ------------------------------------------------------------------

    def __enter__(self) -> "NanWatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
                self._agree()
        finally:
            self.close()

    def step(self) -> None:
        """End of a training step: checks what is pending, then advances the step (from the first
        call on, optimizer steps no longer advance it)."""
        self.flush()
        self._agree()
        self.counter.explicit()

    def replay(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Optional[NanReport]:
        """Run `fn(*args, **kwargs)`, the failing step once more (same parameters, same batch: in
        raise mode the incident stopped it before the optimizer step), recording where each op
        of its forward is created (`watch_trace.StepTrace`: what detect_anomaly records on every
        step, here for this one only). Its report names the first operation whose backward made
        the non-finite gradient, with its line (`operation`), and its findings cover every project
        file from the loss down to that operation (a KL in a helper file). Returns that report, or
        None when the step ran clean."""
        before = len(self.reports)
        step = self.counter.index
        self._reported = {key: seen for key, seen in self._reported.items() if key[0] != step}
        self._trace = StepTrace()
        try:
            with self._trace:
                fn(*args, **kwargs)
        except NonFiniteError as exc:
            return exc.report
        finally:
            self._trace = None
        return self.reports[-1] if len(self.reports) > before else None

    def flush(self) -> None:
        """Read the pending device flags now (automatic at the end of each forward and backward)."""
        self._flush_forward()
        self._check_backward()

    def close(self) -> None:
        """Remove every hook, the optimizer step hook included."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.counter.close()
        self._pending_forward.clear()
        self._pending_backward.clear()
        self._records.clear()
        self._closed = True

    @property
    def step_index(self) -> int:
        return self.counter.index

    @property
    def checking(self) -> bool:
        """Whether the current step is checked (step_index % every == 0)."""
        return self.counter.checking

    # ---- data and steps ----------------------------------------------------------------------

    def _root_pre_hook(self, module, args, kwargs):
        if self.scaler.scaler is not None and not self.counter.manual and self.scaler.skip_ended():
            self.counter.skipped()
        self.counter.forward_started()
        self._records.clear()
        self._thread = threading.get_ident()
        if not self.counter.checking or self._closed:
            return None
        named = list(_named_inputs(self._by_name[""].forward, args, kwargs))
        flagged = _first_flagged([_Event("data", _flag(t), t, self._data_builder(label, t)) for label, t in named])
        if flagged is not None:
            self._emit(flagged.build())
        return None

    def _data_builder(self, label: str, t: torch.Tensor) -> Callable[[], NanReport]:
        def build() -> NanReport:
            rows, batch = _bad_rows(t)
            where = f", batch positions {rows} of {batch}" if rows and batch > 1 else ""
            hint = (
                "the model's input is non-finite before any module runs: a data fault (check the data "
                "pipeline and these samples), not the model; the rest of this step is not reported"
            )
            return self._report(
                "data", "data", "", what=f"input `{label}`{where}", name=label, stats=TensorStats.of(t), hint=hint, module_class=""
            )

        return build

    # ---- forward -----------------------------------------------------------------------------

    def _forward_hook(self, module, args, kwargs, output):
        if not self.counter.checking or self._closed:
            return None
        outputs = list(_tensors(output, "output"))
        if self._check_forward and not self._reported.get((self.counter.index, "forward")):
            for label, t in outputs:
                event = _Event("forward", _flag(t), t, self._forward_builder(module, label, t, args, kwargs))
                if event.flag.device.type != "cpu":
                    self._pending_forward.append(event)
                elif bool(event.flag) and _has_nonfinite(t):
                    self._emit(event.build())
                    break
        if self._watch_backward and torch.is_grad_enabled():
            for label, t in _arg_tensors(args, kwargs):
                if t.requires_grad:
                    self._watch_grad(t, label).consumers.append((module, label))
            for label, t in outputs:
                if t.requires_grad:
                    record = self._watch_grad(t, label)
                    if not any(m is module for m, _ in record.consumers):  # not an input passed through
                        record.producers.append(module)
        if module is self.model:
            self._flush_forward()
        return None

    def _forward_builder(self, module, label, t, args, kwargs) -> Callable[[], NanReport]:
        def build() -> NanReport:
            inputs = [(lab, TensorStats.of(x)) for lab, x in _arg_tensors(args, kwargs)]
            bad_inputs = any(not s.all_finite for _, s in inputs)
            bad_params = [
                self._param_owner.get(id(p), (n, None))[0]
                for n, p in module.named_parameters(recurse=module is self.model)
                if _has_nonfinite(p)
            ]
            if bad_params:
                hint = (
                    "the module's parameters are already non-finite: an earlier optimizer step "
                    "applied a NaN/Inf gradient (watch the backward of earlier steps)"
                )
            elif bad_inputs:
                hint = (
                    "its inputs are already non-finite: the value was created before this module, "
                    "outside any watched module's output (in the caller's code)"
                )
            else:
                hint = "its inputs and parameters are finite: the NaN/Inf is created inside this module's forward"
            stats = TensorStats.of(t)
            return self._report(
                "forward",
                stats.kind,
                self._names.get(id(module), ""),
                what=label,
                stats=stats,
                inputs=inputs,
                hint=hint,
                nonfinite_params=bad_params,
            )

        return build

    def _flush_forward(self) -> None:
        events, self._pending_forward = self._pending_forward, []
        first = _first_flagged(events)
        if first is not None:
            self._emit(first.build())

    # ---- backward ----------------------------------------------------------------------------

    def _watch_grad(self, t: torch.Tensor, label: str) -> _Grad:
        """The record of `t`'s gradient, registering its hook the first time `t` is seen."""
        record = self._records.get(id(t))
        if record is None or record.ref() is not t:
            record = _Grad(weakref.ref(t), label, self.counter.index)
            self._records[id(t)] = record
            t.register_hook(self._grad_hook(record))
        return record

    def _grad_hook(self, record: _Grad):
        def hook(grad):
            if grad is None or self._closed:
                return None
            self._backward_started()
            self._observe_backward(_Event("backward", _flag(grad), grad.detach(), lambda: self._gradient_report(record, grad)))
            return None

        return hook

    def _param_hook(self, p: torch.Tensor):
        full, owner = self._param_owner[id(p)]

        def hook(grad):
            if not self.counter.checking or grad is None or self._closed:
                return None
            self._backward_started()

            def build() -> NanReport:
                hint = (
                    "the gradients arriving at the module's outputs are finite: the NaN/Inf is created "
                    "in this module's own backward (an op whose derivative is infinite at these values)"
                )
                stats = TensorStats.of(grad)
                return self._report(
                    "param_grad",
                    stats.kind,
                    self._names.get(id(owner), ""),
                    name=full,
                    what="gradient of parameter",
                    stats=stats,
                    inputs=[("parameter value", TensorStats.of(p))],
                    hint=hint,
                )

            self._observe_backward(_Event("param_grad", _flag(grad), grad.detach(), build, param=full))
            return None

        return hook

    def _backward_started(self) -> None:
        """At the first hook of a backward: queue the end-of-backward check, find the loss and
        the line that called backward, and flag a non-finite loss."""
        if self._callback_queued:
            return
        try:
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
        except RuntimeError:  # not inside a backward: checked at the next flush instead
            return
        self._callback_queued = True
        self._loss = find_loss_site(self._thread)
        loss = self._loss.loss
        self._loss_flag = _flag(loss) if loss is not None and loss.is_floating_point() else None

    def _observe_backward(self, event: _Event) -> None:
        """Keep a backward event for the end-of-backward check. On the CPU the flag is read at
        once and only non-finite gradients are kept; on an accelerator every flag (and its
        gradient) is kept until the end of the backward, which reads all flags in one transfer."""
        if event.flag.device.type == "cpu":
            if not bool(event.flag):
                return
        self._pending_backward.append(event)

    def _end_of_backward(self) -> None:
        self._callback_queued = False
        self._check_backward()
        self._agree()

    def _check_backward(self) -> None:
        """One read of every flag of the backward, the loss's and the gradient norm; then at most
        one report (the loss, a scale collapse, the first non-finite gradient, or a spike)."""
        if self._loss is None and not self._pending_backward:
            return
        events, self._pending_backward = self._pending_backward, []
        loss, self._loss = self._loss or LossSite(None, "", 0), None
        loss_flag, self._loss_flag = self._loss_flag, None
        step = self.counter.index
        self.scaler.search(lambda: caller_frames(self._thread), nonfinite=False)
        scaled = self.scaler.active()
        norm = total_norm([p.grad for p in self._params if p.grad is not None], self.scaler.scale() if scaled else None)
        values = [e.flag for e in events] + [x for x in (loss_flag, norm) if x is not None]
        read = torch.stack([v.to(values[0].device, torch.float64) for v in values]).cpu().tolist() if values else []
        flags = read[: len(events)]
        loss_bad = loss_flag is not None and bool(read[len(events)])
        baseline = self.history.add(step, read[-1]) if norm is not None else None
        flagged = [e for e, f in zip(events, flags) if f and _has_nonfinite(e.tensor)]
        forward_seen = self._reported.get((step, "forward"), False)
        if flagged and not scaled:
            self.scaler.search(lambda: caller_frames(self._thread), nonfinite=True)
            scaled = self.scaler.active()
        if loss_bad and self._check_forward and not forward_seen:
            data = find_loss_data(self._thread)
            self._emit(self._loss_data_report(loss, data) if data else self._loss_report(loss))
        elif flagged and scaled and not loss_bad and not forward_seen:
            if self.scaler.overflow():
                self._emit(self._collapse_report(self._backward_report(flagged, loss)))
        elif flagged:
            self._emit(self._backward_report(flagged, loss))
        else:
            self.scaler.clean()
            if baseline is not None:
                self._emit(self._spike_report(read[-1], baseline))

    def _backward_report(self, flagged: List[_Event], loss: LossSite) -> NanReport:
        """The report of the first non-finite gradient of a backward, with every parameter whose
        gradient went non-finite in it."""
        report = flagged[0].build()
        report.nonfinite_grads = [e.param for e in flagged if e.param and e.param != report.name]
        report.loss_site = loss.where
        sites = self._trace.failing_path(loss.loss) if self._trace is not None else []
        if sites:
            report.operation = sites[-1].describe()
            report.hint += f"; the first operation whose backward is non-finite is {sites[-1].op} at {sites[-1].where}"
        elif self._trace is None:
            report.hint += (
                "; to name the operation and its line, replay this step: watch.replay(step_fn, *batch) "
                "records where each op of one forward is created"
            )
        report.path_files = self._path_files(report.module, loss, [site.path for site in sites])
        report.findings = path_findings(report.path_files) if self.lint else []
        return report

    def _gradient_report(self, record: _Grad, grad: torch.Tensor) -> NanReport:
        """Blame for a tensor whose gradient is the first to go non-finite: every gradient computed
        before it (downstream of it) was finite, so the non-finite value was made by whoever used
        this tensor: a watched module that took it as an input, else the forward code of the module
        holding it, else the code outside the model (the loss)."""
        stats = TensorStats.of(grad)
        value = record.ref()
        consumers = [(m, label) for m, label in record.consumers if all(m is not p for p in record.producers)]
        if consumers:
            module, label = consumers[0]  # forward hooks run innermost first
            chosen = self._names.get(id(module), "")
            others = [
                n for n in (self._names.get(id(m), "") for m, _ in consumers[1:]) if not (n == "" or chosen.startswith(n + "."))
            ]  # its enclosing modules pass it on
            hint = (
                "the gradient arriving at its outputs is finite and the gradient it passes back to "
                f"{label} is not: the NaN/Inf is created in this module's backward (an op whose "
                "derivative is infinite at these values: a sqrt or norm at 0, a log at 0, a division "
                "by a value that reaches 0)"
            )
            if others:
                hint += "; the tensor is also an input of " + ", ".join(f"`{n}`" for n in others)
            inputs = [(f"forward value of {label}", TensorStats.of(value))] if value is not None else []
            return self._report(
                "backward",
                stats.kind,
                self._names.get(id(module), ""),
                what=f"gradient w.r.t. {label}",
                stats=stats,
                inputs=inputs,
                hint=hint,
                step=record.step,
            )
        inputs = [(f"forward value of {record.label}", TensorStats.of(value))] if value is not None else []
        producer = self._names.get(id(record.producers[0] if record.producers else self.model), "")
        outermost = self._names.get(id(record.producers[-1]), "") if record.producers else ""
        if outermost:  # an intermediate value of the module holding it, used by that module's own code
            holder = outermost.rpartition(".")[0]
            hint = (
                f"the gradient arriving here is already non-finite and no submodule consumed this "
                f"{record.label} of `{producer}`: it is created in the backward of the forward code of "
                f"`{holder or 'the model'}` that uses it between its submodules"
            )
            return self._report(
                "backward",
                stats.kind,
                holder,
                what=f"gradient w.r.t. `{producer}` {record.label}",
                stats=stats,
                inputs=inputs,
                hint=hint,
                step=record.step,
            )
        hint = (
            "the gradient arriving here is already non-finite and no watched module further down the "
            f"graph saw it: it is created by the code that consumes this "
            f"{'output' if 'output' in record.label else 'input'} outside any module (typically the "
            "loss; see where backward was called)"
        )
        return self._report(
            "backward",
            stats.kind,
            producer,
            what=f"gradient w.r.t. {record.label}",
            stats=stats,
            inputs=inputs,
            hint=hint,
            step=record.step,
        )

    # ---- reports -----------------------------------------------------------------------------

    def _loss_report(self, loss: LossSite) -> NanReport:
        assert loss.loss is not None  # reported only for a loss that was found and is non-finite
        stats = TensorStats.of(loss.loss)
        hint = (
            "the model's outputs are finite and the loss is not: the loss code creates the NaN/Inf "
            f"(backward called at {loss.where or 'an unknown place'})"
        )
        report = self._report("forward", stats.kind, "", name="loss", what="the loss", stats=stats, hint=hint, module_class="")
        report.loss_site = loss.where
        report.findings = self._findings("", loss) if self.lint else []
        return report

    def _loss_data_report(self, loss: LossSite, data: List[Tuple[str, torch.Tensor]]) -> NanReport:
        """The model's outputs are finite, the loss is not, and the loss code read a non-finite
        tensor that carries no gradient (a target, a label, a weight): a data fault, named by its
        variable and batch positions, as a non-finite model input is."""
        label, t = data[0]
        rows, batch = _bad_rows(t)
        where = f", batch positions {rows} of {batch}" if rows and batch > 1 else ""
        others = "; also non-finite: " + ", ".join(f"`{name}`" for name, _ in data[1:]) if len(data) > 1 else ""
        hint = (
            "the model's outputs are finite and the loss is not, and a tensor the loss reads without a "
            "gradient (a target, a label, a weight) is non-finite: a data fault (check the data pipeline "
            f"and these samples), not the loss code (backward called at {loss.where or 'an unknown place'})" + others
        )
        report = self._report(
            "data", "data", "", what=f"loss input `{label}`{where}", name=label, stats=TensorStats.of(t), hint=hint, module_class=""
        )
        report.loss_site = loss.where
        return report

    def _collapse_report(self, report: NanReport) -> NanReport:
        scales = " -> ".join(f"{s:.3g}" for s in self.scaler.scales)
        report.phase, report.kind = "scaler", "scale-collapse"
        why = "max_skips" if self.scaler.max_skips is not None else "as many as halve its initial scale to 1"
        report.hint = (
            f"the GradScaler skipped {self.scaler.consecutive} checked steps in a row (scale {scales}), "
            f"its collapse limit ({self.scaler.limit()}: {why}): "
            "the gradients are non-finite at any scale, so this is a NaN/Inf of the model, not an "
            "fp16 overflow. First non-finite gradient: " + report.hint
        )
        return report

    def _spike_report(self, norm: float, baseline: float) -> NanReport:
        count = len(self.history.norms) - 1
        hint = (
            "the gradients are exploding: clip them (torch.nn.utils.clip_grad_norm_) or lower the learning "
            "rate; a NaN/Inf often follows within a few steps"
        )
        return self._report(
            "explosion",
            "explosion",
            "",
            what=(f"global gradient norm {norm:.3g}, {norm / baseline:.3g}x the median {baseline:.3g} of the last {count} checked steps"),
            hint=hint,
            module_class="",
        )

    def _report(
        self,
        phase: str,
        kind: str,
        module: str,
        what: str,
        stats: Optional[TensorStats] = None,
        inputs: Sequence[Tuple[str, TensorStats]] = (),
        hint: str = "",
        name: Optional[str] = None,
        nonfinite_params: Sequence[str] = (),
        step: Optional[int] = None,
        module_class: Optional[str] = None,
    ) -> NanReport:
        owner = self._by_name.get(module, self.model)
        path, line = class_source(type(owner))
        if self.history.growing() and phase != "explosion":
            hint = f"{hint}; {CLIP_HINT}"
        report = NanReport(
            phase=phase,
            kind=kind,
            step=self.counter.index if step is None else step,
            module=module,
            name=module if name is None else name,
            module_class=type(owner).__qualname__ if module_class is None else module_class,
            source=f"{path}:{line}" if module_class is None else "",
            what=what,
            stats=stats,
            inputs=list(inputs),
            nonfinite_params=list(nonfinite_params),
            grad_norms=self.history.norms,
            hint=hint,
            rank=watch_dist.rank(),
        )
        if self.lint and phase in ("forward", "backward", "param_grad"):
            report.path_files = self._path_files(module, None)
            report.findings = path_findings(report.path_files)
        return report

    def _findings(self, module: str, loss: Optional[LossSite]) -> List[str]:
        """Static findings of every file on the failing path (`_path_files`)."""
        return path_findings(self._path_files(module, loss))

    def _path_files(self, module: str, loss: Optional[LossSite], built: Sequence[str] = ()) -> List[str]:
        """The files that define a module on the path from the model to `module`, the file that
        called backward, and (a replayed step) the files whose code built the loss down to the
        failing operation; each once, in that order."""
        parts = module.split(".") if module else []
        path = [self._by_name.get(".".join(parts[:i])) for i in range(len(parts) + 1)]
        files = [class_source(type(m))[0] for m in path if m is not None]
        if loss is not None and loss.path:
            files.append(loss.path)
        return list(dict.fromkeys(f for f in [*files, *built] if f and not f.startswith("<")))

    def _emit(self, report: NanReport) -> None:
        phase = report.phase if report.phase in ("data", "explosion") else "forward" if report.phase == "forward" else "backward"
        key = (report.step, phase)
        raising = self.mode == "raise" and report.phase != "explosion"
        if self._held is not None:
            return
        if not raising and (self._reported.get(key) or len(self.reports) >= self.max_reports):
            return
        self._reported[key] = True
        if report.phase == "data":  # the step's NaNs downstream are the data's
            self._reported[(report.step, "forward")] = self._reported[(report.step, "backward")] = True
        self.reports.append(report)
        if raising and watch_dist.initialised():  # every rank raises together at the next agreement
            self._held = report
        elif raising:
            self._raise(report)
        elif self.mode != "record" or report.phase == "explosion":
            warnings.warn(str(report), NonFiniteWarning, stacklevel=3)

    def _raise(self, report: NanReport) -> None:
        self._pending_forward.clear()
        self._pending_backward.clear()
        raise NonFiniteError(report)

    def _agree(self) -> None:
        """Distributed raise mode: every rank learns whether any rank holds an incident, and
        all raise with the lowest faulting rank's report."""
        if self.mode != "raise" or not watch_dist.initialised():
            return
        held, self._held = self._held, None
        agreed = watch_dist.agree(held.as_dict() if held is not None else None)
        if agreed is None:
            return
        report = held if held is not None and held.rank == agreed["rank"] else NanReport.from_dict(agreed)
        if held is None:
            self.reports.append(report)
        self._raise(report)


def _first_flagged(events: Sequence[_Event]) -> Optional[_Event]:
    """The first event whose flag is set and whose tensor really holds a NaN/Inf (one read of all
    the flags)."""
    if not events:
        return None
    flags = torch.stack([e.flag.to(events[0].flag.device) for e in events]).cpu().tolist()
    return next((e for e, f in zip(events, flags) if f and _has_nonfinite(e.tensor)), None)


def nan_watch(model: nn.Module, **options) -> NanWatch:
    """Watch `model` for the first NaN/Inf: `with nan_watch(model) as watch: ...`, or
    `watch = nan_watch(model); ...; watch.close()`. Options are NanWatch's (mode, every, scaler,
    scope, ...); see the module docstring."""
    return NanWatch(model, **options)
