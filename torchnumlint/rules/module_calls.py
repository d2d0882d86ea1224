"""Calls of `nn` module instances: `module_call` finds the constructor of the module a call
runs (`nn.CrossEntropyLoss()(x, y)`, or through a name or an attribute).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst


if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


def module_call(ctx: "FileContext", call: cst.Call, *classes: str) -> Optional[cst.Call]:
    """For `nn.KLDivLoss(...)(a, b)`, `crit(a, b)` or `self.crit(a, b)` where the callee was built
    from one of `classes` (qualified names), the constructor call; else None."""
    if not any(ctx.mentions(cls.rsplit(".", 1)[-1]) for cls in classes):
        return None  # following every callee's name would cost a scope scan per call
    func = call.func
    ctor = func if isinstance(func, cst.Call) else ctx.resolve(func)
    if isinstance(ctor, cst.Call) and ctx.qualname(ctor.func) in classes:
        return ctor
    return None
