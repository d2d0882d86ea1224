"""TNL4xx, masking and attention: `-inf` fills that reach a softmax (TNL401,
`masked_inf_softmax`) and label smoothing on logits filled with `-inf` (TNL402,
`label_smoothing_inf_logits`).

One module per rule; importing this package registers them.
"""

from torchnumlint.rules.masking import masked_inf_softmax  # noqa: F401
