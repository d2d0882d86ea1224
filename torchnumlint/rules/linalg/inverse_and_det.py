"""TNL213 inverse-and-det: an explicit inverse applied to a matrix or vector (`torch.inverse(A) @
b`), and the log of a determinant (`torch.log(torch.det(A))`).

The determinant is a product of n factors: it underflows to 0 (or overflows to inf) long before
its log leaves the float range. Measured on torch 2.13, CPU, float32: det(0.1 * I) is 0 from
n = 46 (0.5 * I from n = 150), so log(det) is -inf and every entry of its gradient NaN, where
`torch.logdet` gives -138.16 (n = 60) and the finite gradient. Forming the inverse and then
multiplying loses accuracy that solving does not: for 64 x 64 float32 systems of condition 1e6
with b = A x, the error of `inverse(A) @ b` is 9.8 times that of `torch.linalg.solve(A, b)`
and its residual 26,500 times (medians of 50 draws; 4.8x and 41x at condition 1e3).

The sites: `torch.log` (function or method) of `torch.det` / `torch.linalg.det` / `A.det()`, or
of their `abs` (the determinant's range does not depend on evidence: a product of n factors);
a product (`@`, `torch.matmul`, `mm`, `bmm` and their methods) with an inverse (`torch.inverse`,
`torch.linalg.inv`, `A.inverse()`) as either factor, inline or through a local name read only
there (an inverse kept and applied several times is left alone: solving each time is not
obviously better there). The accuracy lost grows with the condition number, so an inverse is
reported by default only with evidence that the matrix is ill-conditioned
(`conditioning_evidence`: a Gram matrix `X^T X`, whose condition number is the square of X's,
or a covariance, regularised or not); a camera's intrinsics, a pose or an orthogonal matrix are
well conditioned, and their inverses are reported only in strict mode.

Fix (SAFE: the same quantity, computed without the loss): `torch.logdet(A)`,
`torch.linalg.slogdet(A).logabsdet` for the log of |det|, `torch.linalg.solve(A, b)` for
`inverse(A) @ b` and `torch.linalg.solve(A, b, left=False)` for `b @ inverse(A)`; only where
the determinant or inverse is written inline (a name read only there is reported without a fix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.evidence import STRICT_WHY
from torchnumlint.rules.syntax import same_code, strip_parens
from torchnumlint.rules.calls import CallMatch, make_op, match_call, Op
from torchnumlint.rules.shapes import through_shape

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext, FixBuilder

DET = make_op("det", {"torch.det", "torch.linalg.det"}, "det")
INVERSE = make_op("inverse", {"torch.inverse", "torch.linalg.inv"}, "inverse")
PRODUCTS = (
    make_op("matmul", {"torch.matmul"}, "matmul", ("other",)),
    make_op("mm", {"torch.mm"}, "mm", ("mat2",)),
    make_op("bmm", {"torch.bmm"}, "bmm", ("mat2",)),
)
_COVARIANCE = {"torch.cov"}
_MATMUL = {"torch.matmul", "torch.mm", "torch.bmm"}
_UNDERFLOW = "det(0.1 * I) is 0 in float32 from size 46: log -inf, gradient NaN"
_ACCURACY = "float32, 64 x 64, condition 1e6: 9.8x the error and 26,500x the residual of solving"


def _gram(ctx: "FileContext", value: cst.BaseExpression) -> bool:
    """`X.T @ X`, `X @ X.T`, `torch.matmul(X.transpose(-1, -2), X)`: a product of a matrix and its
    own transpose (the same code under shape steps, one side transposed)."""
    value = strip_parens(value)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.MatrixMultiply):
        left, right = value.left, value.right
    elif isinstance(value, cst.Call) and ctx.qualname(value.func) in _MATMUL and len(value.args) == 2:
        left, right = value.args[0].value, value.args[1].value
    else:
        return False
    bare = [through_shape(ctx, side, names=False) for side in (left, right)]
    transposed = any(strip_parens(b) is not strip_parens(side) for b, side in zip(bare, (left, right)))
    return transposed and same_code(ctx, bare[0], bare[1])


def conditioning_evidence(ctx: "FileContext", matrix: cst.BaseExpression, depth: int = 3) -> Optional[str]:
    """Why inverting `matrix` loses accuracy that solving keeps: it is a Gram matrix `X^T X`
    (whose condition number is the square of X's) or a covariance, possibly regularised
    (`+ lam * I`), on some value it may hold; None where the code does not say (a camera's
    intrinsics, a pose, an orthogonal matrix are well conditioned)."""
    for origin in ctx.origins(matrix):
        value = strip_parens(origin)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Divide, cst.Multiply)):
            for part in (value.left, value.right):
                found = conditioning_evidence(ctx, part, depth - 1) if depth > 0 else None
                if found is not None:
                    return found
            continue
        if _gram(ctx, value):
            return "a Gram matrix X^T X, whose condition number is the square of X's"
        if isinstance(value, cst.Call) and (
            ctx.qualname(value.func) in _COVARIANCE
            or (isinstance(value.func, cst.Attribute) and value.func.attr.value == "cov" and not value.args)
        ):
            return "a covariance matrix"
    return None


class InverseAndDet(Rule):
    code = "TNL213"
    name = "inverse-and-det"
    finds = (
        "`torch.inverse(A) @ b` of a Gram or covariance matrix (also `linalg.inv`, `.inverse()`, "
        "`matmul`/`mm`/`bmm`, either side) and `torch.log(torch.det(A))`: det(0.1 * I) underflows from size 46 in float32 (log -inf, "
        "NaN gradient); the inverse costs 9.8x the error of solving at condition 1e6"
    )
    fix_summary = "safe: `torch.linalg.solve(A, b)`, `torch.logdet(A)`, `torch.linalg.slogdet(A).logabsdet`"
    message = "linear algebra the long way: {what} ({measured}); use {use}"
    rationale = (
        "A determinant is a product of n factors and leaves the float range long before its log "
        "does. Measured on torch 2.13, CPU, float32: det(0.1 * I) is 0 from size 46 (0.5 * I from "
        "150), so log(det) is -inf and all 3600 entries of its gradient NaN at size 60, where "
        "`torch.logdet` gives -138.16 and a finite gradient; `torch.linalg.slogdet` does the same "
        "for log |det|. An explicit inverse then multiplied loses accuracy that solving does not: "
        "for 64 x 64 float32 systems of condition 1e6 with b = A x, `inverse(A) @ b` has 9.8 "
        "times the error of `torch.linalg.solve(A, b)` and 26,500 times its residual (medians of "
        "50 draws; 4.8x and 41x at condition 1e3): an inverse is reported where the code shows an "
        "ill-conditioned matrix (a Gram matrix X^T X, a covariance). The rewrites compute the "
        "same quantities."
    )
    safety = Safety.SAFE
    needles = ("det", "inverse", "inv(")
    pattern = r"\b(?:det|inverse|inv)\b"  # DET and INVERSE by name (not `detach`, `determine`)
    examples = (
        Example(
            bad=("import torch\n\n\ndef log_volume(cov):\n    return torch.log(torch.det(cov))\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef log_volume(cov):\n    return torch.logdet(cov)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def ridge_weights(X, y, lam):\n"
                "    gram = X.T @ X + lam * torch.eye(X.shape[1])\n"
                "    return torch.inverse(gram) @ (X.T @ y)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def ridge_weights(X, y, lam):\n"
                "    gram = X.T @ X + lam * torch.eye(X.shape[1])\n"
                "    return torch.linalg.solve(gram, X.T @ y)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def flow_log_prob(z, jac, base):\n"
                "    log_abs_det = torch.linalg.det(jac).abs().log()\n"
                "    return base.log_prob(z) + log_abs_det\n"
            ),
            lines=(5,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def flow_log_prob(z, jac, base):\n"
                "    log_abs_det = torch.linalg.slogdet(jac).logabsdet\n"
                "    return base.log_prob(z) + log_abs_det\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "\n"
        "\n"
        "def solve_and_logdet(A, b):\n"
        "    return torch.linalg.solve(A, b), torch.logdet(A), torch.linalg.slogdet(A).logabsdet\n",
        # an inverse kept and applied twice, a determinant not logged
        "import torch\n"
        "\n"
        "\n"
        "def project(K, pts, rays):\n"
        "    K_inv = torch.inverse(K)\n"
        "    return K_inv @ pts, K_inv @ rays, torch.det(K) > 0\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        log = match_call(self.ctx.imports, node, "log")
        if log is not None and log.fully_known:
            self._log_of_det(node, log)
            return
        product = match_call(self.ctx.imports, node, *PRODUCTS)
        if product is not None and product.fully_known and len(product.args) == 1:
            other = next(iter(product.args.values())).value
            self._product(node, product.input, other)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self._product(node, node.left, node.right)

    # -- log(det(A)) -----------------------------------------------------------------------

    def _log_of_det(self, node: cst.Call, log: CallMatch) -> None:
        value = strip_parens(log.input)
        magnitude = match_call(self.ctx.imports, value, "abs")
        inner = strip_parens(magnitude.input) if magnitude is not None and magnitude.fully_known else value
        det, inline = self._made(inner, DET)
        if det is None:
            return
        fix = None
        if inline:
            fix = self.fix()
            matrix = self.ctx.module.code_for_node(strip_parens(det.input))
            if magnitude is None:
                new = f"{self._ref(fix, 'torch.logdet')}({matrix})"
            else:
                new = f"{self._ref(fix, 'torch.linalg.slogdet')}({matrix}).logabsdet"
            fix.replace(node, cst.parse_expression(new))
        use = "`torch.linalg.slogdet(A).logabsdet`" if magnitude is not None else "`torch.logdet(A)`"
        what = "log of a determinant, which under- or overflows long before its log"
        self.report(node, fix, what=what, measured=_UNDERFLOW, use=use)

    # -- inverse(A) @ b --------------------------------------------------------------------

    def _product(self, node: cst.CSTNode, left: cst.BaseExpression, right: cst.BaseExpression) -> None:
        for side, other, on_left in ((left, right, True), (right, left, False)):
            inverse, inline = self._made(strip_parens(side), INVERSE)
            if inverse is None:
                continue
            why = conditioning_evidence(self.ctx, inverse.input)
            if why is None:
                if not self.ctx.strict:
                    return
                why = f"a matrix that may be ill-conditioned {STRICT_WHY}"
            fix = None
            if inline:
                fix = self.fix()
                code = self.ctx.module.code_for_node
                keyword = "" if on_left else ", left=False"
                solve = self._ref(fix, "torch.linalg.solve")
                fix.replace(
                    node, cst.parse_expression(f"{solve}({code(strip_parens(inverse.input))}, {code(strip_parens(other))}{keyword})")
                )
            use = "`torch.linalg.solve(A, b)`" if on_left else "`torch.linalg.solve(A, b, left=False)`"
            what = f"an explicit inverse of {why}, applied to a matrix: less accurate than solving"
            self.report(node, fix, what=what, measured=_ACCURACY, use=use)
            return

    # -- shared ----------------------------------------------------------------------------

    def _made(self, expr: cst.BaseExpression, op: Op) -> Tuple[Optional[CallMatch], bool]:
        """(the call of `op` that `expr` is, whether it is written inline): inline, or a local
        name bound once to it and read only here (no fix then)."""
        match = match_call(self.ctx.imports, expr, op)
        if match is not None:
            return (match, True) if match.fully_known else (None, False)
        if not isinstance(expr, cst.Name) or not self.ctx.only_read_here(expr):
            return None, False
        binding = self.ctx.binding(expr)
        if binding is None or binding.value is None:
            return None, False
        match = match_call(self.ctx.imports, strip_parens(binding.value), op)
        return (match, False) if match is not None and match.fully_known else (None, False)

    @staticmethod
    def _ref(fix: "FixBuilder", qualified: str) -> str:
        return fix.ctx.module.code_for_node(fix.ref(qualified))
