"""TNL213 inverse-and-det: explicit inverses applied to matrices and logs of determinants, in the
forms training and modelling code writes them, and the look-alikes."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

HEAD = "import torch\n\n\n"


def _case(body, line, fixed_body=None):
    """A finding at `line` of HEAD + `body` (HEAD is 3 lines), fixed to HEAD + `fixed_body`."""
    return Flagged(HEAD + body, (line + 3,), HEAD + fixed_body if fixed_body is not None else None)


LINALG_FLAGGED = [
    # the log of a determinant: function, method and linalg spellings
    _case(
        "def gaussian_nll(cov, r):\n    return 0.5 * (torch.log(torch.det(cov)) + r @ r)\n",
        2,
        "def gaussian_nll(cov, r):\n    return 0.5 * (torch.logdet(cov) + r @ r)\n",
    ),
    _case("def log_volume(cov):\n    return torch.det(cov).log()\n", 2, "def log_volume(cov):\n    return torch.logdet(cov)\n"),
    _case(
        "def kernel_logdet(K, noise):\n    K = K + noise * torch.eye(K.shape[-1])\n    return torch.log(torch.linalg.det(K))\n",
        3,
        "def kernel_logdet(K, noise):\n    K = K + noise * torch.eye(K.shape[-1])\n    return torch.logdet(K)\n",
    ),
    # log |det J| of a flow's Jacobian
    _case(
        "def log_jacobian(J):\n    return torch.log(torch.abs(torch.det(J)))\n",
        2,
        "def log_jacobian(J):\n    return torch.linalg.slogdet(J).logabsdet\n",
    ),
    # an inverse of a Gram or covariance matrix times a matrix or vector, on either side, in
    # every product spelling
    _case(
        "def natural_gradient(J, g):\n    fisher = J.T @ J\n    return torch.linalg.inv(fisher) @ g\n",
        3,
        "def natural_gradient(J, g):\n    fisher = J.T @ J\n    return torch.linalg.solve(fisher, g)\n",
    ),
    _case(
        "def whiten(x, feats):\n    cov = torch.cov(feats.T)\n    return x @ torch.inverse(cov)\n",
        3,
        "def whiten(x, feats):\n    cov = torch.cov(feats.T)\n    return torch.linalg.solve(cov, x, left=False)\n",
    ),
    _case(
        "def mahalanobis(diff, feats, eps):\n    cov = feats.T.cov() + eps * torch.eye(feats.shape[1])\n"
        "    return (diff * torch.matmul(torch.inverse(cov), diff)).sum()\n",
        3,
        "def mahalanobis(diff, feats, eps):\n    cov = feats.T.cov() + eps * torch.eye(feats.shape[1])\n"
        "    return (diff * torch.linalg.solve(cov, diff)).sum()\n",
    ),
    _case(
        "def newton_step(J, g, damping):\n    H = torch.bmm(J.transpose(1, 2), J) + damping\n    return torch.bmm(torch.inverse(H), g)\n",
        3,
        "def newton_step(J, g, damping):\n    H = torch.bmm(J.transpose(1, 2), J) + damping\n    return torch.linalg.solve(H, g)\n",
    ),
    _case(
        "def ridge(X, y, lam):\n    A = (X.T @ X) / X.shape[0] + lam * torch.eye(X.shape[1])\n    return A.inverse().matmul(X.T @ y)\n",
        3,
        "def ridge(X, y, lam):\n    A = (X.T @ X) / X.shape[0] + lam * torch.eye(X.shape[1])\n    return torch.linalg.solve(A, X.T @ y)\n",
    ),
    # strict mode: a matrix with no sign of ill-conditioning
    Flagged(
        HEAD + "def apply_inverse(A, b):\n    return torch.inverse(A) @ b\n",
        (5,),
        HEAD + "def apply_inverse(A, b):\n    return torch.linalg.solve(A, b)\n",
        strict=True,
        message="strict mode",
    ),
    # through a name read only at the product or the log: reported, no fix
    _case("def posterior_mean(X, r):\n    S = X @ X.T\n    S_inv = torch.inverse(S)\n    return S_inv @ r\n", 4),
    _case("def log_volume(S):\n    d = torch.det(S)\n    return torch.log(d)\n", 3),
]

LINALG_SILENT = [
    Silent(HEAD + body)
    for body in [
        "def ok(A, b):\n    return torch.linalg.solve(A, b), torch.logdet(A), torch.linalg.slogdet(A).logabsdet\n",
        # an inverse kept and applied several times, or returned
        "def project(K, pts, rays):\n    K_inv = torch.inverse(K)\n    return K_inv @ pts, K_inv @ rays\n",
        "def precision(cov):\n    return torch.inverse(cov)\n",
        "def pose_inverse(T):\n    inv = torch.inverse(T)\n    return inv, inv @ T\n",
        # a determinant that is not logged, or logged with a guard
        "def orientation(J):\n    return torch.det(J) > 0, torch.det(J).sign()\n",
        "def log_volume(cov):\n    return torch.log(torch.det(cov) + 1e-6)\n",
        # numpy and math
        "import math\nimport numpy as np\n\ndef np_version(A, b):\n    return np.linalg.inv(A) @ b, math.log(np.linalg.det(A))\n",
        # well-conditioned matrices (a camera's intrinsics, an orthogonal matrix): strict mode only
        "def unproject(K, pts):\n    return K.inverse() @ pts.transpose(2, 1)\n",
        "def unmerge(w, oft_mat):\n    return torch.mm(w, torch.linalg.inv(oft_mat))\n",
        # a product of two different matrices is no Gram matrix
        "def apply(A, B, b):\n    return torch.inverse(A.T @ B) @ b\n",
        # an inverse's transpose, and a product of two other matrices
        "def sandwich(A, B, C):\n    return torch.inverse(A).T, B @ C\n",
        # a module attribute named inverse (a flow's inverse pass), applied to a tensor
        "class Flow(torch.nn.Module):\n    def forward(self, z, x):\n        return self.inverse(z) @ x\n",
    ]
]


@pytest.mark.parametrize("code, case", harness.params("TNL213", LINALG_FLAGGED, LINALG_SILENT))
def test_inverse_and_det(code, case):
    harness.check(code, case)
