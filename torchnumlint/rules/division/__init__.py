"""TNL201-TNL202, TNL212, divisions by values that can be 0: a norm, a sum, a deviation, a count, a
root of such a value, or a box union, area or side (TNL201 unguarded-division), a tensor divided
by its own 2-norm, which `F.normalize` computes safely (TNL202 normalize-manual), and the N - 1 of
a corrected `std`/`var` over a set of one (TNL212 std-of-size-one, off by default).

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
- A product with such a factor (`dot / (a.norm() * b.norm())`, a cosine similarity by hand) is
  TNL201's until the catalogue's cosine-similarity-manual rule exists to rewrite it; sums of
  exponentials go to softmax-manual, and a division inside `torch.where(...)` to
  where-unselected-branch (catalogue rules not written yet).
"""

from torchnumlint.rules.division import normalize_manual  # noqa: F401
from torchnumlint.rules.division import std_of_size_one  # noqa: F401
from torchnumlint.rules.division import unguarded_division  # noqa: F401
