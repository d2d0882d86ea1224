"""`Spans.statement_indent` answers from the statements' nesting, as a scan of every statement did.

The scan (kept here as the definition) took the last statement, in (start, end) order, that
starts at or before the node and ends at or after it; the indentation is read at its start. The
nesting climb must give the same indentation for every node of every shape of block.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from torchnumlint.positions import Spans
from torchnumlint.walk import children

SOURCE = textwrap.dedent(
    """\
    import torch

    @torch.no_grad()
    @staticmethod
    def f(x, y):
        if x:
            for i in range(3):
                y = torch.log(
                    x / (y + 1)
                )
            else: z = 1; w = torch.exp(z)
        elif y:
            while True:
                with torch.autocast("cuda"):
                    try:
                        return x / y
                    except ValueError:
                        pass
                    finally:
                        del y
        return lambda q: q / 2

    class M(torch.nn.Module):
        def forward(self, x):
            if x: return torch.sqrt(x)
            return [v / x for v in x]
    x = 1; y = x / 2
    """
)


def _scan(spans: Spans, node: cst.CSTNode) -> str:
    start, end = spans.offsets(node)
    inner = None
    for span in sorted(spans._statements):
        if span[0] > start:
            break
        if span[1] >= end:
            inner = span
    return spans.indent_at(inner[0] if inner is not None else start)


def _nodes(node: cst.CSTNode):
    yield node
    for child in children(node):
        yield from _nodes(child)


def test_statement_indent_is_that_of_the_innermost_statement_around_the_node():
    module = cst.parse_module(SOURCE)
    spans = Spans(module, module.code)
    checked = 0
    for node in _nodes(module):
        if isinstance(node, cst.Module):
            continue
        assert spans.statement_indent(node) == _scan(spans, node), module.code_for_node(node)
        checked += 1
    assert checked > 100  # the walk reached every node, not a few
    division = next(n for n in _nodes(module) if isinstance(n, cst.BinaryOperation) and "y + 1" in module.code_for_node(n))
    assert spans.statement_indent(division) == " " * 12  # the `y = torch.log(` line, not the call's continuation
