"""What a reproduction declares (`Repro`) and what it runs with (`ReproContext`).

The contract between the reproductions (`repros/`, one module per rule) and the checks that run
them (`runner.py`, `checks.py`, `judging.py`): both import this module and neither imports the other's internals, so the
reproductions never depend on the runner. A `Repro` holds builders that take a `ReproContext`, and a
`ReproContext` holds its `Repro`: the two types refer to each other, so they live here together.

Also here, because both sides need them: the dtype tables and `load_function` (exec an example's
text, return its function; an example's CUDA autocast runs under CUDA's policy, `cuda_policy`, on a
device without CUDA).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union, cast

import torch

import torchnumlint.catalogue as catalogue
from torchnumlint.runtime_check import cuda_policy, oracles
from torchnumlint.runtime_check.oracles import Result

# The dtype a run's inputs are built in ("autocast": float32 inputs, autocast casts inside).
TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "autocast": torch.float32,
}
# The dtypes a reproduction runs in: a hazard of the formula only, or one of precision.
FP32 = ("float32",)
PRECISION = ("float32", "bfloat16", "float16")

Inputs = Dict[str, Union[torch.Tensor, float]]  # tensors, and Python numbers (a temperature)
Builder = Callable[["ReproContext"], Inputs]


class ReproError(Exception):
    """A reproduction cannot run as written (missing function, bad example text)."""


@dataclass(frozen=True)
class Bound:
    """How far an UNSAFE fix may move values inside the region its guard changes (the adversarial
    inputs): |fix - reference| <= abs + rel * |reference|, entry by entry, and `why` says where the
    bound comes from (the eps of the fix, the clamp it applies)."""

    why: str
    abs: float = 0.0
    rel: float = 0.0

    def allows(self, diff: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return diff <= self.abs + self.rel * reference.abs()


@dataclass(frozen=True)
class Repro:
    """The reproduction of one example of a rule (`example`, 0 = the first).

    It names the function the example defines, the oracle of the catalogue (NF, ERR, WV, ZG, WARN
    for "(warning)"), the dtypes it runs in, and builders for adversarial inputs (built at the
    measured hazard threshold of that dtype) and benign inputs (away from the hazard, where the fix
    must give the original's values whatever its safety). `reference` is the mathematics the
    example computes, written for the rule in float64 with the example function's parameters and
    independent of both the original and the fix: the fix is judged against it. An UNSAFE fix
    states its `bound` inside the guarded region. A rule whose hazard is not a function of tensors
    (a training step, a deprecated API) has a `custom` check instead of the runner's generic one.
    """

    code: str
    oracle: str  # NF, ERR, WV, ZG or WARN
    func: str  # the function the example defines
    dtypes: Tuple[str, ...]
    adversarial: Optional[Builder] = None
    benign: Optional[Builder] = None
    grad: Tuple[str, ...] = ()  # inputs whose gradients are checked
    thresholds: Mapping[str, str] = field(default_factory=dict)  # dtype -> what the inputs are
    example: int = 0
    reference: Optional[Callable[..., Any]] = None  # float64 mathematics, same parameters as `func`
    bound: Optional[Bound] = None  # UNSAFE fixes: the change allowed inside the guarded region
    fixed_from: str = "fixed"  # "fixed" (the linter's fix) or "good" (first good snippet, GUIDE rules)
    error_match: str = ""  # ERR: a substring of the expected error
    custom: Optional[Callable[[ReproContext], Result]] = None
    skip: Optional[Callable[[ReproContext], Optional[str]]] = None
    note: str = ""
    # Further benign input sets, each (what it is, builder): the example at other shapes (a batch
    # dim, 3-D and 4-D, the reduced dim not last) and scales, where a fix that drops a `dim` or a
    # `keepdim`, or broadcasts wrongly, computes other values than the reference (at 2-D the
    # implicit dim of log_softmax is -1, at 3-D it is 0).
    shapes: Tuple[Tuple[str, Builder], ...] = ()
    # A method-bound example ("Class.method"): builds the instance from the class (default: the
    # class called with no arguments); an nn.Module is then moved to the dtype of the run.
    instance: Optional[Callable[[type], Any]] = None
    # Where the mathematics is undefined (a norm's subgradient at 0, a fully masked row, 0/0), the
    # convention the reference assumes there: printed with every verdict, so a reference that
    # happens to agree with the fix's own convention says so instead of matching it silently.
    convention: str = ""

    def threshold_for(self, dtype_name: str) -> str:
        return self.thresholds.get(dtype_name, self.thresholds.get("*", ""))


@dataclass
class ReproContext:
    """What a reproduction needs: the rule as the catalogue reads it, where and in what to run, and
    the text the linter's fixer made of the example (`fixed`; None when it offers no fix)."""

    info: catalogue.RuleInfo
    repro: Repro
    device: torch.device
    dtype_name: str
    fixed: Optional[str] = None

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

    @property
    def example(self) -> catalogue.ExampleInfo:
        return self.info.examples[self.repro.example]

    @property
    def fix_safety(self) -> str:
        """The safety of the example's fix ("SAFE"/"UNSAFE"/"GUIDE"): its own where the example
        says, else the rule's."""
        return self.example.safety.upper() if self.example.safety else self.info.safety

    def source(self, side: str) -> str:
        """The text a side runs: "bad" (the example), "fixed" (the linter's fix of it) or "good"
        (the rule's first good snippet, for GUIDE rules that have no fix)."""
        if side == "bad":
            return self.example.bad
        if side == "fixed":
            if self.fixed is None:
                raise ReproError(f"{self.info.code}: the linter offers no fix for example {self.repro.example + 1}")
            return self.fixed
        if side == "good":
            if not self.info.good:
                raise ReproError(f"{self.info.code}: the rule has no good snippet")
            return self.info.good[0]
        raise ValueError(side)

    @property
    def emulated(self) -> bool:
        """Does the example's CUDA autocast run under the emulated CUDA policy (no CUDA here)? Not
        for a WARN check: the call that warns is the very spelling the emulation would replace."""
        return self.device.type != "cuda" and self.repro.oracle != "WARN" and cuda_policy.uses_cuda_autocast(self.example.bad)

    def autocast_region(self):
        """Where the "autocast" dtype computes: CUDA autocast on CUDA, its emulation elsewhere;
        for the other dtypes, no region."""
        if self.dtype_name != "autocast":
            return contextlib.nullcontext()
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.float16)
        return cuda_policy.cuda_autocast()

    def load(self, side: str, func: Optional[str] = None, dtype: Optional[torch.dtype] = None) -> Callable:
        """Exec the side's text into a fresh namespace and return its function; for a method
        ("Class.method") the method of a fresh instance (`Repro.instance`), an nn.Module moved to
        `dtype` (default: the run's), so its parameters meet inputs of that dtype."""
        name = func or self.repro.func
        owner, _, method = name.rpartition(".")
        loaded = load_function(self.source(side), owner or name, f"<{self.info.code} {side}>", emulate_cuda=self.emulated)
        if not owner:
            return loaded
        # for a method, what was loaded is its class
        obj = self.repro.instance(cast(type, loaded)) if self.repro.instance else loaded()
        if isinstance(obj, torch.nn.Module):
            obj = obj.to(device=self.device, dtype=dtype or self.dtype)
        bound = getattr(obj, method, None)
        if not callable(bound):
            raise ReproError(f"<{self.info.code} {side}>: {owner} has no method {method!r}")
        return bound

    def result(self, verdict: str, **kw) -> Result:
        if self.emulated:
            kw.setdefault("evidence", []).insert(
                0,
                f"CUDA autocast run on {self.device.type} under CUDA's op policy (cuda_policy.py: exp, "
                "log, pow, sum, softmax, norms in float32; matmul, linear, conv in float16; the rest as given)",
            )
        return Result(
            self.info.code,
            self.info.name,
            str(self.device),
            self.dtype_name,
            self.repro.oracle,
            self.fix_safety,
            verdict,
            threshold=self.repro.threshold_for(self.dtype_name),
            example=self.repro.example + 1,
            **kw,
        )


def load_function(text: str, func: str, filename: str, emulate_cuda: bool = False) -> Callable:
    """Exec `text`, return its function `func`. With `emulate_cuda`, the text's CUDA autocast
    runs under `cuda_policy` on whatever device its tensors are."""
    namespace: Dict[str, object] = {"__name__": "torchnumlint_repro"}
    if emulate_cuda:
        text = cuda_policy.port(text)
        namespace.update(cuda_policy.NAMESPACE)
    exec(compile(text, filename, "exec"), namespace)
    fn = namespace.get(func)
    if not callable(fn):
        raise ReproError(f"{filename} defines no function {func!r}")
    return fn
