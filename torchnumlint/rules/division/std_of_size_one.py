"""TNL212 std-of-size-one (off by default): `.std(d)` / `.var(d)` (and `torch.std`/`torch.var`)
with the default Bessel correction, over a set that can hold a single element: the batch axis
(`x.std(0)`: the last batch of an epoch without `drop_last` can have one sample) or a selection by
a mask (`x[mask].var()`: one element selected). The estimator divides by N - 1 = 0: NaN, and torch
only warns ("degrees of freedom is <= 0").

Heuristic (most batches hold more than one sample): off by default, enabled by its code, by a
prefix (`--select TNL21`) or by `--select ALL`. An explicit `unbiased=`/`correction=` is the
author's choice and never reported.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.evidence import STRICT_WHY, is_not_torch
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.rewrite import with_keyword

_CHOSEN = frozenset({"unbiased", "correction", "ddof"})
_SELECTING = frozenset({"masked_select", "index_select", "nonzero"})


class StdOfSizeOne(Rule):
    code = "TNL212"
    name = "std-of-size-one"
    finds = "`.std(d)`/`.var(d)` with the default correction over the batch axis (`dim=0`) or a masked selection: N - 1 = 0 gives NaN for one element"
    fix_summary = "unsafe: `correction=0`"
    message = "`{op}` with the default correction over {what}: N - 1 = 0 for one element gives NaN (torch only warns); pass `correction=0` or guard the size"
    rationale = (
        "`std` and `var` divide by N - 1 by default (Bessel's correction). Over one element that "
        "is 0 / 0: measured on torch 2.13, `torch.ones(1).std()` and `torch.tensor([[1., 2.]])"
        ".std(0)` are NaN, with only a UserWarning; with `correction=0` they are 0. A batch "
        "statistic (`x.std(0)`) meets it on the last batch of an epoch that holds one sample, a "
        "statistic of a masked selection when the mask keeps one element. The fix, "
        "`correction=0`, is the population estimator: it changes every result by sqrt((N - 1) "
        "/ N) for std and (N - 1) / N for var, so it is unsafe; a size guard keeps the unbiased "
        "estimate where N > 1. Off by default: that one element is reached is rarely shown."
    )
    safety = Safety.UNSAFE
    default = False
    needles = ("std", "var")
    examples = (
        Example(
            bad=("import torch\n\n\ndef standardize_batch(x):\n    return (x - x.mean(0)) / (x.std(0) + 1e-5)\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef standardize_batch(x):\n    return (x - x.mean(0)) / (x.std(0, correction=0) + 1e-5)\n"),
        ),
    )
    good = (
        "import torch\n\n\ndef standardize_batch(x):\n    return (x - x.mean(0)) / (x.std(0, correction=0) + 1e-5)\n",
        "import torch\n\n\ndef layer_stats(x):\n    return x.std(-1, unbiased=False), x.var(dim=-1, keepdim=True)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        match = match_call(self.ctx.imports, node, "std", "var")
        if match is None or not match.fully_known or match.given("unbiased"):
            return
        if any(a.keyword is not None and a.keyword.value in _CHOSEN for a in node.args):
            return
        ctx = self.ctx
        if is_not_torch(ctx, match.input) or (match.form == "method" and isinstance(match.input, cst.Name) and match.input.value == "self"):
            return
        what = self._one_element(match)
        if what is None:
            if not ctx.strict:
                return
            what = f"a set that may hold one element {STRICT_WHY}"
        fix = self.fix()
        fix.replace(node, with_keyword(node, "correction", cst.Integer("0")))
        self.report(node, fix, op=match.op.name, what=what)

    def _one_element(self, match) -> Optional[str]:
        """Why the reduced set can hold one element, or None."""
        ctx = self.ctx
        dim = match.arg("dim")
        if dim is not None and number_value(strip_parens(dim)) == 0:
            return "dim 0, the batch (a last batch of one sample)"
        source = strip_parens(ctx.resolve(match.input))
        if isinstance(source, cst.Subscript) and any(isinstance(e.slice, cst.Index) and is_mask(ctx, e.slice.value) for e in source.slice):
            return "a masked selection (one element selected)"
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and source.func.attr.value in _SELECTING:
            return "a selection (one element selected)"
        return None
