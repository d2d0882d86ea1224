"""TNL1xx, KL divergence: `F.kl_div` / `nn.KLDivLoss` called with probabilities where PyTorch
expects log-probabilities (TNL102, `kl_div_prob_input`), or with a probability target whose
zeros poison the gradient (TNL101, `kl_div_prob_target`), or reduced with "mean", which divides
by batch x classes instead of the batch (TNL114, `kl_div_mean_reduction`).

One module per rule. What they share lives in the shared matcher layer: the KL call sites in any
form and the evidence that no gradient reaches a target in `rules/losses.py`, the softmax
recogniser in `made_by.softmax_call`, and the fix placement (the call, or the one assignment of
the softmax) in `rules/rewrite.py`. `rules/registry.py` finds its rule modules.
"""
