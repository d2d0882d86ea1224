"""Where the code being visited runs in float16: the evidence every mixed-precision rule on LibCST
nodes needs before it reports (TNL308, and any rule whose hazard is float16's range).

Code runs in float16 when, going out from the node:

- a `with` of an fp16 autocast encloses it in its function (`with torch.autocast("cuda"):`), or
  the function is decorated with one;
- or the project index (`torchnumlint/index.py`) says an fp16 region reaches the enclosing
  function through the call graph (a training loop under autocast calling `model(x)`, a model
  built by a project builder, a `.half()` model): the finding cites that region.

An island on the way out (a `with` or decorator whose autocast is not float16: disabled,
bfloat16, CPU) ends the search with no evidence: what runs there is float32 or bfloat16.
The index's `Site` says where the region is; `region_text` is how every finding says it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.amp import fp16_openers, opens_island

if TYPE_CHECKING:
    from torchnumlint.context import FileContext
    from torchnumlint.index import Site


@dataclass(frozen=True)
class Fp16Reach:
    """Why the visited code runs in float16: `text` is what a finding says (the region, where it
    is, whether only a flag turns it on, and the builder it reaches through)."""

    text: str
    device: str = "cuda"


def region_text(site: "Site") -> str:
    """Where a finding's fp16 comes from: the region (and the framework setting, `Site.what`),
    whether only a flag turns it on, and the builder that carries it to the code (`Site.via`)."""
    text = site.where + (f", {site.what}" if site.what else "")
    if site.opt_in:
        text += ", if its precision setting is fp16" if site.what else ", enabled only by its `enabled=` flag"
    return text + (f", {site.via}" if site.via else "")


def fp16_reach(ctx: "FileContext") -> Optional[Fp16Reach]:
    """The fp16 region the node being visited runs in, innermost first; None when none is known or
    an island (a non-float16 autocast) encloses it first."""
    positions = None
    for node in reversed(ctx.stack):
        if not isinstance(node, (cst.With, cst.FunctionDef)):
            continue
        if opens_island(ctx, node):
            return None
        openers = fp16_openers(ctx, node)
        if openers:
            expr, (device, opt_in) = openers[0]
            positions = positions or ctx.positions
            line = positions[expr].start.line
            flag = ", enabled only by its `enabled=` flag" if opt_in else ""
            return Fp16Reach(f"{ctx.path}:{line}{flag}", device)
        if isinstance(node, cst.FunctionDef) and ctx.index is not None:
            positions = positions or ctx.positions
            key = f"{ctx.path}:{positions[node.name].start.line}:{node.name.value}"
            site = ctx.index.reached.get(key)
            if site is not None:
                return Fp16Reach(region_text(site), site.device)
    return None
