"""TNL204, TNL206, square roots (and fractional powers) of values that reach 0 or go below it:
a 2-norm written by hand, whose exact rewrite is `torch.linalg.vector_norm` (TNL204
sqrt-of-sum-of-squares), and every other root of a value that can be 0 or negative: a variance,
a difference, a reduction of squares, an elementwise square, an element-wise sum of squares
(`sqrt(gx * gx + gy * gy)`), a quadratic form (TNL206
unguarded-sqrt-or-pow). At 0 a root's derivative is infinite, so the backward pass gives inf or
0 * inf = NaN; below 0 the forward pass is NaN.

The shapes are recognised in `rules/shapes.py`. A root written directly as a divisor is TNL201's
(its fix clamps inside the root) and a root of a sum of squares TNL204's (`rules/ownership.py`).
`.std()` is not a root hazard: torch 2.13 masks its gradient to 0 where it is 0 (measured:
`torch.ones(5).std()` has gradient 0, `torch.sqrt(torch.ones(5).var())` NaN), so `x.std(d)` is
the safe spelling of `sqrt(x.var(d))`.
"""
