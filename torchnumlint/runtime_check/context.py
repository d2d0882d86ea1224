"""What a reproduction declares (`Repro`) and what it runs with (`ReproContext`).

The contract between the reproductions (`repros/`, one module per rule) and the checks that run
them (`runner.py`): both import this module and neither imports the other's internals, so the
reproductions never depend on the runner. A `Repro` holds builders that take a `ReproContext`, and a
`ReproContext` holds its `Repro`: the two types refer to each other, so they live here together.

Also here, because both sides need them: the dtype tables, `port_to_cpu` (CUDA autocast examples on
a machine without CUDA) and `load_function` (exec an example's text, return its function).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Optional, Tuple

import torch

from torchnumlint.runtime_check import catalogue, oracles
from torchnumlint.runtime_check.oracles import Result

# The dtype a run's inputs are built in ("autocast": float32 inputs, autocast casts inside).
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float64": torch.float64, "autocast": torch.float32}
# The dtypes a reproduction runs in: a hazard of the formula only, or one of precision.
FP32 = ("float32",)
PRECISION = ("float32", "bfloat16", "float16")

Inputs = Dict[str, torch.Tensor]
Builder = Callable[["ReproContext"], Inputs]


class ReproError(Exception):
    """A reproduction cannot run as written (missing function, bad example text)."""


@dataclass(frozen=True)
class Repro:
    """One rule's reproduction: the hazard of the rule's FIRST example.

    It names the function the first example defines, the oracle of the catalogue (NF, ERR, WV, ZG,
    WARN for "(warning)"), the dtypes it runs in, and builders for adversarial inputs (built at the
    measured hazard threshold of that dtype) and benign inputs (where the original is fine and a
    SAFE fix must give the same values). A rule whose hazard is not a function of tensors (a
    training step, a deprecated API) has a `custom` check instead of the runner's generic one.
    """

    code: str
    oracle: str  # NF, ERR, WV, ZG or WARN
    func: str  # the function the first example defines
    dtypes: Tuple[str, ...]
    adversarial: Optional[Builder] = None
    benign: Optional[Builder] = None
    grad: Tuple[str, ...] = ()  # inputs whose gradients are checked
    thresholds: Mapping[str, str] = field(default_factory=dict)  # dtype -> what the inputs are
    fixed_from: str = "fixed"  # "fixed" (the pinned fix) or "good" (first good snippet, GUIDE rules)
    reference: str = "fixed"  # WV: the side run in float64 as the reference
    error_match: str = ""  # ERR: a substring of the expected error
    check_benign_equal: bool = True  # a SAFE fix must equal the original on benign inputs
    port_autocast: bool = False  # on the CPU, run CUDA autocast examples under CPU fp16 autocast
    custom: Optional[Callable[[ReproContext], Result]] = None
    skip: Optional[Callable[[ReproContext], Optional[str]]] = None
    note: str = ""

    def threshold_for(self, dtype_name: str) -> str:
        return self.thresholds.get(dtype_name, self.thresholds.get("*", ""))


@dataclass
class ReproContext:
    """What a reproduction needs: the rule as the catalogue reads it, where and in what to run."""

    info: catalogue.RuleInfo
    repro: Repro
    device: torch.device
    dtype_name: str

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the inputs (float32 under autocast: autocast casts inside)."""
        return TORCH_DTYPES[self.dtype_name]

    @property
    def compute_dtype(self) -> torch.dtype:
        return torch.float16 if self.dtype_name == "autocast" else self.dtype

    @property
    def tol(self) -> float:
        return oracles.tolerance(self.dtype_name)

    def autocast(self):
        """The autocast region for the "autocast" dtype (fp16 on CUDA and on CPU); otherwise none."""
        if self.dtype_name != "autocast":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.float16)

    @property
    def first(self) -> catalogue.ExampleInfo:
        return self.info.examples[0]

    @property
    def fix_safety(self) -> str:
        """The safety of the first example's fix ("SAFE"/"UNSAFE"/"GUIDE"): its own where the
        example says, else the rule's."""
        return self.first.safety.upper() if self.first.safety else self.info.safety

    def source(self, side: str) -> str:
        """The text a side runs: "bad" (first example), "fixed" (its pinned fix) or "good" (the
        rule's first good snippet, for GUIDE rules that have no fixed text). For a repro with
        `port_autocast`, CUDA autocast is ported to CPU float16 autocast when running on the CPU
        (the same change on both sides; see `port_to_cpu`)."""
        if side == "bad":
            text = self.first.bad
        elif side == "fixed":
            if self.first.fixed is None:
                raise ReproError(f"{self.info.code}: the first example has no fixed text")
            text = self.first.fixed
        elif side == "good":
            if not self.info.good:
                raise ReproError(f"{self.info.code}: the rule has no good snippet")
            text = self.info.good[0]
        else:
            raise ValueError(side)
        if self.ported:
            text = port_to_cpu(text)
        return text

    @property
    def ported(self) -> bool:
        return self.repro.port_autocast and self.device.type != "cuda"

    def load(self, side: str, func: Optional[str] = None) -> Callable:
        """Exec the side's text into a fresh namespace and return its function."""
        return load_function(self.source(side), func or self.repro.func, f"<{self.info.code} {side}>")

    def result(self, verdict: str, **kw) -> Result:
        if self.ported:
            kw.setdefault("evidence", []).insert(
                0, "CUDA autocast in the example ported to CPU float16 autocast (" + _CPU_AUTOCAST + ")")
        return Result(self.info.code, self.info.name, str(self.device), self.dtype_name, self.repro.oracle,
                      self.fix_safety, verdict, threshold=self.repro.threshold_for(self.dtype_name), **kw)


_CPU_AUTOCAST = 'torch.autocast("cpu", dtype=torch.float16)'


def port_to_cpu(text: str) -> str:
    """A CUDA autocast example, ported to the CPU: fp16 autocast on "cpu" (CPU autocast defaults
    to bfloat16; CUDA autocast to float16), custom_fwd/custom_bwd and GradScaler on "cpu"."""
    text = re.sub(r'torch\.(?:amp\.)?autocast\(\s*(?:device_type=)?"cuda"\s*\)', _CPU_AUTOCAST, text)
    text = re.sub(r'torch\.(?:amp\.)?autocast\(\s*(?:device_type=)?"cuda"\s*,', 'torch.autocast("cpu",', text)
    text = text.replace('device_type="cuda"', 'device_type="cpu"')
    text = re.sub(r'GradScaler\(\s*"cuda"', 'GradScaler("cpu"', text)
    return text


def load_function(text: str, func: str, filename: str) -> Callable:
    namespace: Dict[str, object] = {"__name__": "torchnumlint_repro"}
    exec(compile(text, filename, "exec"), namespace)
    fn = namespace.get(func)
    if not callable(fn):
        raise ReproError(f"{filename} defines no function {func!r}")
    return fn
