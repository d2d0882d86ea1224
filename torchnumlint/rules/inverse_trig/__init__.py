"""TNL2xx, inverse trigonometric functions at the edge of their domain: `acos` / `asin` of a
cosine (TNL208, `acos_asin_unclamped`), which rounding takes onto or past +-1, where acos is NaN
beyond and its gradient infinite on the edge.

What a cosine is (a cosine similarity, a dot product of unit vectors or over the norms, a
quaternion's scalar part, a rotation's `(trace - 1) / 2`) is the shared `rules/cosines.py`,
which the cosine-similarity rule (TNL203) asks too. `rules/registry.py` finds the rule modules.
"""
