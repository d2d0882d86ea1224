"""TNL2xx, linear algebra computed the long way: an explicit inverse applied to a vector or a
matrix, and the log of a determinant (TNL213, `inverse_and_det`). `torch.linalg.solve` and
`torch.logdet` / `torch.linalg.slogdet` compute the same quantities without forming the inverse
or the determinant, which lose accuracy and underflow. `rules/registry.py` finds the rule modules.
"""
