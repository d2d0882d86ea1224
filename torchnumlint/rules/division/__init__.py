"""TNL201-TNL203, divisions by values that can be 0: a norm, a sum, a deviation, a count, a root
of such a value, or a box union, area or side (TNL201 unguarded-division), a tensor divided
by its own 2-norm, which `F.normalize` computes safely (TNL202 normalize-manual), and a cosine
similarity written by hand, which `F.cosine_similarity` computes safely (TNL203).

The sites are recognised in `rules/divisors.py` (shared with the root family, `rules/roots/`).
Ownership between the rules, so that one hazard gives one finding (declared in
`rules/ownership.py`, and only while the owner is enabled):
- `x / x.norm(dim=d, keepdim=True)` (2-norm, same x) is TNL202's; TNL201 takes every other norm.
- A square root written directly as a denominator (`x / torch.sqrt(v)`) is TNL201's (its fix
  clamps inside the root); a root anywhere else is TNL206's, and TNL201 does not follow a name to
  a root that TNL206 reports where it is computed.
- A square root of a sum of squares (or a product of two) is TNL204's. As a denominator TNL201
  still reports the division, without a fix: TNL204's rewrite to `vector_norm` comes first and
  the next fix pass then guards the norm (TNL201) or turns it into `F.normalize` (TNL202).
- A dot product over the product of the two vectors' norms (`(a * b).sum(d) / (a.norm(dim=d) *
  b.norm(dim=d))`, a cosine similarity by hand; what a cosine is: `rules/cosines.py`) is
  TNL203's (cosine-similarity-manual), whose `F.cosine_similarity` rewrite is exact; TNL201
  takes every other product with such a factor. Sums of exponentials go to softmax-manual, and
  a division inside `torch.where(...)` stays TNL201's (where-unselected-branch is not written yet).
"""
