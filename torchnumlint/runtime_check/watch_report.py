"""What nan_watch hands the user: the report of one incident, its errors and warnings, and the
static findings of the files on the failing path.

Kept apart from the hooks (`watch.py`) so that a report can be built, printed, compared and
rebuilt from its dict (another rank's report arrives as a dict) without a model. Torch-only; the
linter (libcst) is imported lazily, and only to compute the findings of a report.
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

PHASES = ("forward", "backward", "param_grad", "data", "explosion", "scaler")


class NonFiniteError(FloatingPointError):
    """A NaN or Inf was found (raise mode); `.report` is the NanReport."""

    def __init__(self, report: "NanReport") -> None:
        super().__init__(str(report))
        self.report = report


class NonFiniteWarning(RuntimeWarning):
    """A report in warn mode, and a gradient spike (never raised: a spike is not yet a NaN)."""


@dataclass
class TensorStats:
    """Shape, dtype, non-finite counts and the spread of the finite values of one tensor."""

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

    @property
    def kind(self) -> str:
        """ "nan" when any value is NaN, else "inf" when any is infinite, else "finite"."""
        return "nan" if self.nan else "inf" if self.inf else "finite"

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

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TensorStats":
        return cls(**{**data, "shape": tuple(data["shape"])})

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
            parts.append(f"finite {self.finite}: min {self.min:.4g} max {self.max:.4g} mean {self.mean:.4g} std {self.std:.4g}")
        elif self.numel:
            parts.append("no finite value")
        return ", ".join(parts)

    def as_dict(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class NanReport:
    """One incident. `phase` is where it was seen (PHASES), `kind` what it is ("nan", "inf",
    "data", "explosion", "scale-collapse"), `module` the qualified name of the module to blame
    ("" for the model itself and for data faults), `name` what went bad (a module, a parameter,
    an input argument), `rank` the torch.distributed rank (None outside it)."""

    phase: str
    kind: str
    step: int
    module: str
    name: str = ""
    module_class: str = ""
    source: str = ""  # file:line of the blamed module's class
    what: str = ""  # "output[1]", "gradient w.r.t. input[0]", "gradient of parameter", "input `x`"
    stats: Optional[TensorStats] = None
    inputs: List[Tuple[str, TensorStats]] = field(default_factory=list)
    nonfinite_params: List[str] = field(default_factory=list)
    nonfinite_grads: List[str] = field(default_factory=list)
    grad_norms: List[Tuple[int, float]] = field(default_factory=list)  # (step, global grad norm), oldest first
    loss_site: str = ""  # file:line of the code that called backward
    operation: str = ""  # a replayed step: the first op whose backward went non-finite, with its line
    path_files: List[str] = field(default_factory=list)  # the project files linted for `findings`
    hint: str = ""
    findings: List[str] = field(default_factory=list)
    rank: Optional[int] = None

    @property
    def headline(self) -> str:
        rank = f"[rank {self.rank}] " if self.rank is not None else ""
        where = f"`{self.name}`" if self.name else "the watched model"
        cls = f" ({self.module_class}, {self.source})" if self.module_class else ""
        if self.phase == "data":
            return f"{rank}non-finite data at step {self.step}: {self.what} of the model"
        if self.phase == "explosion":
            return f"{rank}gradient spike at step {self.step}: {self.what}"
        if self.phase == "scaler":
            return f"{rank}GradScaler scale collapse at step {self.step}: {self.what} of {where}{cls}"
        label = "NaN" if self.kind == "nan" else "Inf"
        if self.name == "loss" and not self.module_class:
            return f"{rank}{label} in the loss at step {self.step} (the model's outputs are finite)"
        return f"{rank}{label} in {self.phase} at step {self.step}: {self.what} of {where}{cls}"

    def __str__(self) -> str:
        lines = [self.headline]
        if self.stats is not None:
            lines.append(f"  value: {self.stats.describe()}")
        lines.extend(f"  {label}: {stats.describe()}" for label, stats in self.inputs)
        if self.nonfinite_params:
            lines.append("  non-finite parameters: " + ", ".join(self.nonfinite_params))
        if self.nonfinite_grads:
            lines.append("  parameters with non-finite gradients: " + ", ".join(self.nonfinite_grads))
        if self.grad_norms:
            lines.append("  global gradient norm by step: " + " -> ".join(f"{norm:.3g} (step {step})" for step, norm in self.grad_norms))
        if self.operation:
            lines.append(f"  first operation whose backward is non-finite: {self.operation}")
        if self.loss_site:
            lines.append(f"  backward called at: {self.loss_site}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        if self.findings:
            lines.append("  torchnumlint findings on the failing path:")
            lines.extend(f"    {f}" for f in self.findings)
        return "\n".join(lines)

    def as_dict(self) -> Dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["stats"] = self.stats.as_dict() if self.stats is not None else None
        data["inputs"] = [[label, s.as_dict()] for label, s in self.inputs]
        data["grad_norms"] = [list(pair) for pair in self.grad_norms]
        for key in ("nonfinite_params", "nonfinite_grads", "findings", "path_files"):
            data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "NanReport":
        """The report `as_dict` gave (another rank's report, received as a dict)."""
        data = dict(data)
        data["stats"] = TensorStats.from_dict(data["stats"]) if data.get("stats") else None
        data["inputs"] = [(label, TensorStats.from_dict(s)) for label, s in data.get("inputs", [])]
        data["grad_norms"] = [(int(s), float(n)) for s, n in data.get("grad_norms", [])]
        return cls(**data)


_SOURCE_CACHE: Dict[type, Tuple[str, int]] = {}


def class_source(cls: type) -> Tuple[str, int]:
    """(file, line) of a class's definition; ("<unknown>", 0) for classes without source."""
    if cls not in _SOURCE_CACHE:
        try:
            path = inspect.getsourcefile(cls) or inspect.getfile(cls)
            line = inspect.getsourcelines(cls)[1]
        except (TypeError, OSError):
            path, line = "<unknown>", 0
        _SOURCE_CACHE[cls] = (path, line)
    return _SOURCE_CACHE[cls]


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_FINDINGS_CACHE: Dict[Tuple[str, Tuple[str, ...]], List[str]] = {}


def _display(path: str) -> str:
    """`path` relative to the working directory when it lies below it, else as it is."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def static_findings(path: str, project: Sequence[str] = ()) -> List[str]:
    """torchnumlint's findings (default rules) in `path`, "file:line:col: CODE message", when the
    linter is installed; else []. PyTorch's own files are not linted (not the user's to fix).
    `project`: the files linted with it as one project (the failing path's), so that a helper's
    finding can rest on its caller in another of them (a loss helper's KL on the step's call)."""
    mine = [p for p in dict.fromkeys((path, *project)) if _lintable(p)]
    key = (path, tuple(mine))
    if key in _FINDINGS_CACHE:
        return _FINDINGS_CACHE[key]
    result: List[str] = []
    if _lintable(path):
        try:
            from torchnumlint.engine import lint_text  # lazy: libcst is needed only here
            from torchnumlint.index import build_index
            from torchnumlint.rules.registry import all_rules

            texts = {p: _read(p) for p in mine}
            rules = [r for r in all_rules() if r.default]
            shown = _display(path)
            index = build_index(texts.items())
            result = [
                f"{shown}:{finding.line}:{finding.col}: {finding.code} {finding.message}"
                for finding in lint_text(path, texts[path], rules, index)
            ]
        except ImportError:
            result = []
        except Exception:  # the linter failed on this file: the report goes out without its findings
            result = []
    _FINDINGS_CACHE[key] = result
    return result


def _lintable(path: str) -> bool:
    return os.path.isfile(path) and not os.path.abspath(path).startswith(_TORCH_DIR)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def path_findings(paths: Iterable[str]) -> List[str]:
    """The findings of every file in `paths` (each file once, in the order given), the files
    linted as one project."""
    seen: Sequence[str] = list(dict.fromkeys(p for p in paths if p))
    return [f for p in seen for f in static_findings(p, seen)]
