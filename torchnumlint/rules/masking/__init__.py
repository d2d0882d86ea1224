"""TNL4xx, masking and attention: `-inf` fills that reach a softmax (TNL401,
`masked_inf_softmax`) and label smoothing on logits filled with `-inf` (TNL402,
`label_smoothing_inf_logits`). The two share `fills`: where a value was filled with `-inf`, and
whether that fill can cover a whole row (the softmax's hazard) or any entry (the smoothed loss's).

One module per rule; `rules/registry.py` finds them.
"""
