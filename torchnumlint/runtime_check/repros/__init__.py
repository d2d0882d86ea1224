"""The reproductions of each rule's examples, on a real device.

The layout mirrors the rules': the reproduction of the rule in `rules/<family>/<rule_name>.py` is
`REPRO`, a `context.Repro` of its first example, in `repros/<family>/<rule_name>.py`, beside its
input builders, the measured thresholds they sit at and the float64 mathematics the fix is judged
against; a module reproduces further examples in `FURTHER` (a tuple of `Repro`, each naming its
`example`). Input builders that several reproductions share are in
`inputs.py`. This package imports every rule's module and gathers them into `REPROS`; the rule
modules never import this package back, so the registry is complete once it is imported, whichever
module is imported first.

Adding a rule: write `repros/<family>/<rule_name>.py` defining `REPRO` and add it to `MODULES`
below (`tests/runtime_check/test_repros.py` fails until both are done), then run
`python -m torchnumlint.runtime_check --select TNLxxx --device cpu`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Dict, Sequence, Tuple

from torchnumlint.runtime_check.context import Repro
from torchnumlint.runtime_check.repros.cross_entropy import bce_on_sigmoid, probabilities_into_cross_entropy
from torchnumlint.runtime_check.repros.division import normalize_manual, unguarded_division
from torchnumlint.runtime_check.repros.kl_div import kl_div_mean_reduction, kl_div_prob_input, kl_div_prob_target
from torchnumlint.runtime_check.repros.log_domain import log_of_sigmoid, log_of_softmax
from torchnumlint.runtime_check.repros.log_domain import logsumexp_manual, softmax_manual
from torchnumlint.runtime_check.repros.masking import label_smoothing_inf_logits, masked_inf_softmax
from torchnumlint.runtime_check.repros.mixed_precision import (
    attention_scaled_after_matmul,
    clip_scaled_gradients,
    deprecated_cuda_amp,
    eps_below_fp16,
    fp16_autocast_custom_op,
    fp16_overflow_constant,
    fp16_without_grad_scaler,
)
from torchnumlint.runtime_check.repros.roots import sqrt_of_sum_of_squares, unguarded_sqrt_or_pow
from torchnumlint.runtime_check.repros.special_functions import exp_minus_one, log_one_plus, softplus_manual
from torchnumlint.runtime_check.repros.special_functions import logit_manual
from torchnumlint.runtime_check.repros.special_functions import sigmoid_manual

MODULES: Sequence[ModuleType] = (
    kl_div_prob_target, kl_div_prob_input, kl_div_mean_reduction,
    log_of_softmax, log_of_sigmoid,
    logsumexp_manual, softmax_manual,
    unguarded_division, normalize_manual,
    sqrt_of_sum_of_squares, unguarded_sqrt_or_pow,
    fp16_autocast_custom_op, fp16_without_grad_scaler, deprecated_cuda_amp, attention_scaled_after_matmul,
    clip_scaled_gradients, fp16_overflow_constant, eps_below_fp16,
    log_one_plus, exp_minus_one, softplus_manual,
    bce_on_sigmoid, probabilities_into_cross_entropy,
    sigmoid_manual, logit_manual,
    masked_inf_softmax, label_smoothing_inf_logits,
)


def by_code(modules: Sequence[ModuleType]) -> Dict[str, Tuple[Repro, ...]]:
    """The reproductions of each module (`REPRO`, then `FURTHER`), by rule code; two modules of
    one code, or two reproductions of one example, are an error."""
    repros: Dict[str, Tuple[Repro, ...]] = {}
    for module in modules:
        code = module.REPRO.code
        if code in repros:
            raise RuntimeError(f"duplicate reproduction {code} in {module.__name__}")
        found = (module.REPRO,) + tuple(getattr(module, "FURTHER", ()))
        examples = [r.example for r in found]
        if len(set(examples)) != len(examples) or any(r.code != code for r in found):
            raise RuntimeError(f"{module.__name__}: one reproduction per example of {code}")
        repros[code] = found
    return repros


REPROS: Dict[str, Tuple[Repro, ...]] = by_code(MODULES)
