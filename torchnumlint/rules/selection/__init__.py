"""TNL209, values computed on every entry and selected afterwards: `torch.where(c, torch.log(x),
y)`, `(s / n).masked_fill(n == 0, 0)`. The forward keeps only the finite entries, but the backward
multiplies the dropped branch's derivative (inf at the edge of log, sqrt, 1 / x) by 0: NaN
(TNL209 where-unselected-branch). Where a selection holds a node, and whether its condition
tests the value, is asked of `rules/selections.py`. Importing this package registers its rules.
"""

from torchnumlint.rules.selection import where_unselected_branch  # noqa: F401
