"""TNL202 normalize-manual: `x / x.norm(dim=d, keepdim=True)` of the same x is 0/0 = NaN for an
all-zero row; `F.normalize(x, dim=d)` computes the same values and 0 there (an exact rewrite, so
this rule owns the site, `rules/ownership.py`)."""

from __future__ import annotations

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example
from torchnumlint.rules.divisors import DivisionRule, in_where, normalize_site, replaces_whole
from torchnumlint.rules.evidence import STRICT_WHY, row_evidence
from torchnumlint.rules.syntax import strip_parens


class NormalizeManual(DivisionRule):
    code = "TNL202"
    name = "normalize-manual"
    finds = "`x / x.norm(dim=d, keepdim=True)`"
    fix_summary = "safe: `F.normalize(x, dim=d)`"
    message = "`x / x.norm(dim, keepdim=True)` is 0/0 = NaN {why}; use `F.normalize(x, dim=...)`"
    rationale = (
        "Dividing a tensor by its own 2-norm gives 0/0 = NaN, forward and backward, for every "
        "all-zero row (padding, dead features, an empty bag). `F.normalize(x, dim=d)` computes "
        "`x / max(||x||, 1e-12)`: the same values wherever the norm is at least 1e-12, and 0 "
        "instead of NaN for a zero row. Only the explicit-dim, keepdim=True, 2-norm form of the "
        "same side-effect-free x is rewritten (other norms are TNL201's). In float16 the default "
        "eps rounds to 0: pass `eps=torch.finfo(x.dtype).tiny` there."
    )
    safety = Safety.SAFE
    needles = ("norm",)
    pattern = r"/|div"
    examples = (
        Example(
            bad=("import torch\n\n\ndef unit_rows(x):\n    h = torch.relu(x)\n    return h / h.norm(dim=-1, keepdim=True)\n"),
            lines=(6,),
            fixed=("import torch\n\n\ndef unit_rows(x):\n    h = torch.relu(x)\n    return torch.nn.functional.normalize(h, dim=-1)\n"),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch.nn import functional as F\n"
                "\n"
                "\n"
                "class Head(torch.nn.Module):\n"
                "    def forward(self, feats, protos):\n"
                "        n = torch.linalg.norm(feats, dim=1, keepdim=True)\n"
                "        feats = feats / n\n"
                "        w = self.proj.weight / torch.norm(self.proj.weight, 2, 0, True)\n"
                "        return feats @ w * (\n"
                "            protos[0]\n"
                "            / torch.linalg.vector_norm(protos[0], dim=-1, keepdim=True)\n"
                "        )\n"
            ),
            lines=(8, 11),
            fixed=(
                "import torch\n"
                "from torch.nn import functional as F\n"
                "\n"
                "\n"
                "class Head(torch.nn.Module):\n"
                "    def forward(self, feats, protos):\n"
                "        n = torch.linalg.norm(feats, dim=1, keepdim=True)\n"
                "        feats = F.normalize(feats, dim=1)\n"
                "        w = self.proj.weight / torch.norm(self.proj.weight, 2, 0, True)\n"
                "        return feats @ w * (\n"
                "            F.normalize(protos[0], dim=-1)\n"
                "        )\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "def f(x, y):\n"
        "    a = x / y.norm(dim=-1, keepdim=True)\n"
        "    b = x / x.norm(dim=-1)\n"
        "    c = x / x.norm(p=1, dim=-1, keepdim=True)\n"
        "    return a + b + c + x / x.norm()\n",
        "import torch\nimport torch.nn.functional as F\n"
        "def f(x, eps=1e-8):\n"
        "    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps) + F.normalize(x, dim=-1)\n",
        "import torch\n"
        "def f(x, y):\n"
        "    n = x.norm(dim=1, keepdim=True)\n"
        "    x = x + y\n"
        "    return x / n + f(x) / f(x).norm(dim=1, keepdim=True)\n",
    )

    def division(self, node: cst.CSTNode, x: cst.BaseExpression, d: cst.BaseExpression) -> None:
        if not replaces_whole(node) or in_where(self.ctx):
            return
        dim = normalize_site(self.ctx, x, d, node)
        if dim is None:
            return
        why = row_evidence(self.ctx, x)
        if why is None:
            if not self.ctx.strict:
                return  # the norm of a learned embedding or a network's output is never 0
            why = STRICT_WHY
        fix = self.fix()
        code = self.ctx.module.code_for_node
        func = code(fix.ref("torch.nn.functional.normalize"))
        fix.replace(node, cst.parse_expression(f"{func}({code(strip_parens(x))}, dim={code(dim)})"))
        self.report(node, fix, why=why)
