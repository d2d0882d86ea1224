"""TNL1xx, special functions written by hand: `log(1 + x)` (TNL106, `log_one_plus`),
`exp(x) - 1` (TNL107, `exp_minus_one`), `log(1 + exp(x))` (TNL108, `softplus_manual`),
`1 / (1 + exp(-x))` (TNL111, `sigmoid_manual`), `log(p / (1 - p))` (TNL112, `logit_manual`),
`atan(y / x)` (TNL210, `atan_of_ratio`): each loses precision, overflows or leaves its domain
where torch's own function does not. And `exp` of a value in log space that nothing bounds
(TNL211, `exp_unbounded`, off by default).

One module per rule; importing this package registers them. The shapes (`1 + x` in any spelling,
an `exp` through names, a value bounded above) are `rules/elementary.py`'s; where a fix of a form
read through names goes, and how torch's function is spelled, is `placing`.
"""

from torchnumlint.rules.special_functions import exp_minus_one, log_one_plus, softplus_manual  # noqa: F401
from torchnumlint.rules.special_functions import sigmoid_manual  # noqa: F401  (TNL111)
from torchnumlint.rules.special_functions import logit_manual  # noqa: F401  (TNL112)
from torchnumlint.rules.special_functions import atan_of_ratio  # noqa: F401  (TNL210)
from torchnumlint.rules.special_functions import exp_unbounded  # noqa: F401  (TNL211)
