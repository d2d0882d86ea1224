"""TNL1xx, logs of probabilities and exps normalised by hand: `log(softmax(x))` (TNL103,
`log_of_softmax`) and `log(sigmoid(x))`, `log(1 - sigmoid(x))` or the log of a sigmoid's
probability of a label (TNL104, `log_of_sigmoid`), whose probabilities underflow to exactly 0 long
before the log-probabilities stop being finite; `log(exp(x).sum(d))`, `log(exp(x).mean(d))` and
`log(exp(a) + exp(b))` (TNL109, `logsumexp_manual`) and `exp(x) / exp(x).sum(d, keepdim=True)`
(TNL110, `softmax_manual`), whose exps overflow (and underflow) without the max subtracted.

One module per rule; what the rules share is in `sites` (what a log reads, and how its fix is
placed) and `handwritten` (softmaxes and label probabilities written out by hand). The shared
matcher layer answers the rest: "is this a softmax / sigmoid" in `made_by.softmax_call` /
`made_by.sigmoid_call`, "what is the -inf used for" in `rules/uses.py`, "rewrite the one
assignment, recompute at the use, or no fix" in `rules/rewrite.py`. `rules/registry.py`
finds its rule modules.
"""
