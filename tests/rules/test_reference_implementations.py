"""A test's reference implementation of an op is written the naive way on purpose, to check the
real op against on inputs the test bounds: the by-hand rules (TNL109, TNL110, TNL111) leave it
alone, and still report the same code in a model (`gradient_context.in_reference_implementation`)."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

TABLE = """
    import torch
    def module_inputs(make_input):
        return [
            dict(forward_input=make_input((10, 20)),
                 reference_fn=lambda m, p, i: torch.exp(i) / torch.exp(i).sum(1, keepdim=True)),
            dict(forward_input=make_input((10, 20)),
                 reference_fn=lambda m, p, i: torch.log(torch.exp(i).sum(1))),
            dict(forward_input=make_input((10,)),
                 ref=lambda i: 1 / (1 + torch.exp(-i))),
        ]
    """

NAMED = """
    import torch
    def reference_softmax(x):
        e = torch.exp(x)
        return e / e.sum(-1, keepdim=True)
    def logsumexp_ref(x):
        return torch.log(torch.exp(x).sum(-1))
    """

IN_A_MODEL = """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            e = torch.exp(x)
            return e / e.sum(-1, keepdim=True), torch.log(torch.exp(x).sum(-1)), 1 / (1 + torch.exp(-x))
    """


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL110",
        [
            Flagged(
                IN_A_MODEL,
                (6,),
                """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, -1), torch.log(torch.exp(x).sum(-1)), 1 / (1 + torch.exp(-x))
    """,
            )
        ],
        [Silent(TABLE), Silent(NAMED)],
    )
    + harness.params(
        "TNL109",
        [
            Flagged(
                IN_A_MODEL,
                (6,),
                """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            e = torch.exp(x)
            return e / e.sum(-1, keepdim=True), torch.logsumexp(x, -1), 1 / (1 + torch.exp(-x))
    """,
            )
        ],
        [Silent(TABLE), Silent(NAMED)],
    )
    # TNL111 only in strict mode here: nothing shows the forward input passes 88.7 in magnitude
    + harness.params(
        "TNL111",
        [
            Flagged(
                IN_A_MODEL,
                (6,),
                """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            e = torch.exp(x)
            return e / e.sum(-1, keepdim=True), torch.log(torch.exp(x).sum(-1)), torch.sigmoid(x)
    """,
                strict=True,
            )
        ],
        [Silent(TABLE, strict=True)],
    ),
)
def test_reference_implementations_are_naive_on_purpose(code, case):
    harness.check(code, case)
