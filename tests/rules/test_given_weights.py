"""TNL201 on weights a function is given (issue 16, the kornia line fit read UNCLEAR twice):
`weights.sum()` of a parameter is 0 only where a caller in the project passes weights that can
all be 0 (a 0/1 inlier mask, a threshold, a random drop); the message names that caller.
Weights every caller makes positive (`exp(-d)` scores), or no caller in the project, are no
evidence: strict mode only.

Measured on torch 2.13 CPU: `(w * x).sum(-1) / w.sum(-1)` with `w = (r < thr).float()` all
False gives NaN (0/0) in the forward and NaN in every gradient entry of `x`."""

import pytest

from tests.rules import harness
from tests.rules.harness import Project

FIT = """\
    import torch


    def _fit_weighted(points: torch.Tensor, weights: torch.Tensor):
        w_sum = weights.sum(dim=-1, keepdim=True)
        x_mean = (weights * points[..., 0]).sum(dim=-1, keepdim=True) / w_sum
        y_mean = (weights * points[..., 1]).sum(dim=-1, keepdim=True) / w_sum
        return torch.cat([x_mean, y_mean], -1)


    def fit_line(points, weights=None):
        if weights is None:
            return points.mean(-2)
        return _fit_weighted(points, weights)
    """

PROJECTS = [
    # an inlier mask from a threshold, passed straight to the helper in another file
    Project(
        {
            "geometry/line.py": FIT,
            "geometry/ransac.py": """\
        import torch
        from geometry.line import _fit_weighted


        def refit_inliers(points, residuals, threshold):
            inliers = (residuals < threshold).float()
            return _fit_weighted(points, inliers)
        """,
        },
        lines={"geometry/line.py": (6, 7)},
        message="passed to `_fit_weighted` by the call (geometry/ransac.py:7)",
    ),
    # the same through the public wrapper of the same file, its caller elsewhere
    Project(
        {
            "geometry/line.py": FIT,
            "tracking.py": """\
        import torch
        from geometry.line import fit_line


        def track(points, scores):
            keep = scores > 0.5
            return fit_line(points, keep.float())
        """,
        },
        lines={"geometry/line.py": (6, 7)},
        message="when every weight is 0: `scores > 0.5`",
    ),
    # look-alike: every caller's weights are exp() of a distance, strictly positive
    Project(
        {
            "geometry/line.py": FIT,
            "geometry/ransac.py": """\
        import torch
        from geometry.line import fit_line


        def soft_refit(points, residuals, temperature):
            weights = torch.exp(-residuals / temperature)
            return fit_line(points, weights)
        """,
        },
    ),
    # look-alike: no caller in the project (a public helper): strict mode only
    Project({"geometry/line.py": FIT}),
    Project({"geometry/line.py": FIT}, lines={"geometry/line.py": (6, 7)}, strict=True, message="strict mode"),
]


@pytest.mark.parametrize("code, case", harness.params("TNL201", projects=PROJECTS))
def test_weights_are_judged_at_their_callers(code, case):
    harness.check(code, case)
