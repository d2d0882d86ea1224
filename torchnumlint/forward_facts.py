"""What a class's `forward` computes, as the project index records it: plain data, no judgement.

The index (`index.py`) walks each project `nn.Module` / `autograd.Function` forward once with `ast`
and writes down what it does, here; TNL301 (`rules/mixed_precision/forward_hazards.py`) decides
from these records, under the CUDA autocast policy, what of it overflows or underflows in float16
and how to say so. Keeping the two apart lets the records be cached per file (they pickle, and
compare equal after a round trip) while the policy stays with the rule that applies it.

A forward is a flat table of its expressions (`Forward.exprs`), in the order of a pre-order walk of
its body: nested functions, lambdas and classes are left out (they do not run here). An entry's
children are positions in the same table (`Ref`), None where there is none (`f(x)` has no receiver)
or it is a lambda (its body does not run here). Being flat, the table is as long as the body
and any depth of nesting records, pickles and reads without recursion; its entries are named
tuples, which pickle compactly (a project holds hundreds of thousands of them). Being tuples, two
entries of different kinds with equal fields compare equal: tell kinds apart with `isinstance`.

Expression kinds: `Number` (a literal the vocabulary reads as a number: `1e-8`, `-1e9`,
`float("inf")`), `Name`, `BinOp` (with its operator's `ast` class name), `Unary`, `Item` (`x[i]`),
`Attr` (`x.T`, `self.eps`), `Call` (callee as written and through the imports, receiver, arguments,
explicit dtypes, and whether it calls a compiled extension kernel), and `Other` for every other
expression (a comparison, a list, a `*args`, a string). `BinOp` and `Call` carry their `Span`, what
a finding points at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple, Union

Ref = Optional[int]  # a position in `Forward.exprs`; None: not a recorded expression


class Span(NamedTuple):
    """Where an expression is: 1-based lines, 0-based character columns (not bytes)."""

    line: int
    col: int
    end_line: int
    end_col: int


class Number(NamedTuple):
    value: float


class Name(NamedTuple):
    id: str


class BinOp(NamedTuple):
    op: str  # the `ast` operator's class name: "Mult", "Div", "Add", "Pow", ...
    left: Ref
    right: Ref
    span: Span
    same: bool = False  # a product of the same code on both sides (`h * h`): a square


class Unary(NamedTuple):
    operand: Ref


class Item(NamedTuple):
    value: Ref  # what is indexed or sliced


class Attr(NamedTuple):
    attr: str
    value: Ref


class Call(NamedTuple):
    qual: Optional[str]  # the callee's qualified name through the imports (`torch.sqrt`), None if unknown
    method: Optional[str]  # the attribute called (`sqrt` of `torch.sqrt`, `var` of `h.var`), None for `f(x)`
    receiver: Ref  # what the attribute is taken of (`h` of `h.var(-1)`), None for `f(x)`
    args: Tuple[Ref, ...]  # positional arguments (a `*args` is None)
    keywords: Tuple[Tuple[str, Ref], ...]  # named arguments (`**kwargs` left out)
    dtypes: Tuple[str, ...]  # qualified dotted names among the positional and `dtype=` arguments
    span: Span
    kernel: Optional[str] = None  # the callee's text when it is a compiled extension kernel (`_C.roi_pool`)


class Other(NamedTuple):
    """An expression of a kind not recorded in detail."""


Expr = Union[Number, Name, BinOp, Unary, Item, Attr, Call, Other]


class Binding(NamedTuple):
    """One binding of a local name in the forward: `name = value` (its value recorded), or any
    other (`a, b = ...`, `x += 1`, a loop or `with` target: `value` is None)."""

    name: str
    value: Ref
    island: bool  # inside an island (below)


@dataclass
class Forward:
    """The facts of one forward. An *island* is a `with` block whose autocast the vocabulary
    (`rules/autocast.py`) reads as not float16 (disabled, bfloat16, CPU): `islands` are the runs of
    `exprs` inside one."""

    exprs: List[Expr] = field(default_factory=list)
    bindings: List[Binding] = field(default_factory=list)
    islands: List[Tuple[int, int]] = field(default_factory=list)  # [start, stop) runs of `exprs`
    params: FrozenSet[str] = frozenset()  # parameters after self/ctx not known to be numbers (default, annotation)
    defaults: Dict[str, float] = field(default_factory=dict)  # parameter -> the number it defaults to
    init_numbers: Dict[str, float] = field(default_factory=dict)  # `self.attr = number`, set once in `__init__`
    # `self.attr = Layer(...)` in `__init__`: attr -> what may be constructed there, each as
    # (simple name, qualified name through the imports); `("", None)` for a value of unknown kind
    submodules: Dict[str, Tuple[Tuple[str, Optional[str]], ...]] = field(default_factory=dict)
    returns: List[Ref] = field(default_factory=list)  # the values of its `return` statements
    cast_inputs_fp32: bool = False  # decorated with `custom_fwd(cast_inputs=torch.float32)`
    under_island: bool = False  # decorated with an autocast that is not float16

    def in_island(self, position: int) -> bool:
        return any(start <= position < stop for start, stop in self.islands)
