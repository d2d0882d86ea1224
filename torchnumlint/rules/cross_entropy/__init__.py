"""TNL1xx, probabilities handed to losses that expect logits or log-probabilities: binary cross
entropy on a sigmoid (TNL105, `bce_on_sigmoid`) and probabilities into `cross_entropy` /
`nll_loss` (TNL113, `probabilities_into_cross_entropy`).

One module per rule; importing this package registers them.
"""
