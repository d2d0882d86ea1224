"""TNL1xx, special functions written by hand: `log(1 + x)` (TNL106, `log_one_plus`),
`exp(x) - 1` (TNL107, `exp_minus_one`), `log(1 + exp(x))` (TNL108, `softplus_manual`),
`1 / (1 + exp(-x))` (TNL111, `sigmoid_manual`), `log(p / (1 - p))` (TNL112, `logit_manual`):
each loses precision or overflows where torch's own function does not.

One module per rule; `rules/registry.py` finds them. The shapes (`1 + x` in any spelling,
an `exp` through names, a value bounded above) are `rules/elementary.py`'s; where a fix of a form
read through names goes, and how torch's function is spelled, is `placing`.
"""
