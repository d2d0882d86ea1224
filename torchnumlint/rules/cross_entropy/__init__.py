"""TNL1xx, probabilities handed to losses that expect logits or log-probabilities: binary cross
entropy on a sigmoid (TNL105, `bce_on_sigmoid`) and probabilities into `cross_entropy` /
`nll_loss` (TNL113, `probabilities_into_cross_entropy`).

One module per rule; what both share is in `sites`: a loss call in function form or through an
`nn` loss module (inline, a name, an attribute), and the fix of its input (in place, at the one
assignment, or recomputed at the use). "Is this a sigmoid / softmax" is `made_by.sigmoid_call` /
`made_by.softmax_call` (helpers and models ending in an activation too). `rules/registry.py`
finds its rule modules.
"""
