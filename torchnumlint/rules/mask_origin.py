"""Where a mask comes from, and whether that is evidence that it can select nothing.

Every rule that asks "can this be empty?" asks here: TNL201 of a count (`mask.sum()`) or a sum of
masked values, TNL401 of a `-inf` fill that may cover a whole row. The answer follows the standard
of a maintainer who knows how the code is used (`shared/judging.md`):

- **A padding or length mask is no evidence.** `ids != pad_id`, `targets != ignore_index`,
  `arange(T) < lengths`, a tokenizer's `attention_mask`, `key_padding_mask`, "non-zero rows"
  (`x.abs().sum(-1) > 0`): all-zero only for a sequence with no tokens at all, which no real batch
  holds. Such a mask is `padding`, with the phrase naming it (for strict mode's message).
- **A selection that is empty in normal use is evidence**, named with where it comes from: labels
  compared with a class (`labels == c`: a class absent from the batch), values past a threshold
  (`scores > thr`, `iou >= pos_thr`), a random draw (`torch.rand(n) < p`, `bernoulli`), and masks
  whose name says they select (`pos_mask`, `fg`, `matched`, `visible`, `valid` flags from the
  data, `keep`) where the construction is not visible here.
- **A mask the code bounds is never empty**: an element always set (`m[:, 0] = True`), a diagonal
  (`| eye`, `fill_diagonal_`): `bounded`.
- A mask built only from constants and shapes (`torch.ones`, `arange(n).ge(step)`, a triangle, a
  module's options) is `constant`: what its author chose; `fills.masks_first_row` reads the one
  construction that plainly covers a row.
- Anything else (a parameter named `mask` whose callers are not seen, a helper's result) is
  unknown: no evidence, so a finding needs `--strict`.

`origin(ctx, mask)` follows the mask back through names (every assignment that reaches it),
`self.x` (every assignment in its class, read in the method that makes it), comparisons, logical
operators, casts, reshapes, indexing, helpers' arguments and loops. One way with evidence is
enough (a selection on one branch is empty there); a padding or bounded way adds none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Set

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.callers import callers
from torchnumlint.rules.masks import says_mask
from torchnumlint.rules.syntax import number_value, strip_parens, words
from torchnumlint.rules.ways import ways
from torchnumlint.rules.bindings import all_params
from torchnumlint.rules.calls import is_literal
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


@dataclass(frozen=True)
class Origin:
    """What a mask is made from: `why` it can select nothing (evidence, a phrase for the message;
    None: no evidence), whether it is `constant` (constants and shapes only), `padding` (the phrase
    naming a padding or length mask: no evidence by itself) or `bounded` (never empty)."""

    why: Optional[str] = None
    constant: bool = False
    padding: Optional[str] = None
    bounded: bool = False


CONSTANT = Origin(constant=True)
UNKNOWN = Origin()
BOUNDED = Origin(bounded=True)

# Calls whose value depends only on their sizes (a shape in, a fixed pattern out).
_CONSTRUCTORS = frozenset(
    {
        "torch.ones",
        "torch.zeros",
        "torch.empty",
        "torch.full",
        "torch.arange",
        "torch.eye",
        "torch.linspace",
        "torch.ones_like",
        "torch.zeros_like",
        "torch.empty_like",
        "torch.full_like",
        "numpy.ones",
        "numpy.zeros",
        "numpy.full",
        "numpy.eye",
        "numpy.arange",
        "numpy.tri",
    }
)
_NEW_TENSOR = frozenset({"new_ones", "new_zeros", "new_full", "new_empty"})
# What only reads a size: constant whatever tensor it is asked of.
_SIZE_METHODS = vocabulary.SIZE_METHODS
_SIZE_ATTRIBUTES = vocabulary.SIZE_ATTRIBUTES
# Steps that keep the entries of their receiver (casts, reshapes, copies): only it matters.
_KEEPS_RECEIVER = vocabulary.SAME_VALUES | vocabulary.OTHER_CASTS | vocabulary.DETACH | vocabulary.REPEATS | {"flip"}
# Element-wise logic: constant operands give a constant mask.
_ELEMENTWISE_METHODS = frozenset(
    {
        "eq",
        "ne",
        "ge",
        "gt",
        "le",
        "lt",
        "abs",
        "neg",
        "logical_and",
        "logical_or",
        "logical_not",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "tril",
        "triu",
        "tril_",
        "triu_",
    }
)
_ELEMENTWISE_FUNCTIONS = frozenset(
    {
        "torch.eq",
        "torch.ne",
        "torch.ge",
        "torch.gt",
        "torch.le",
        "torch.lt",
        "torch.logical_and",
        "torch.logical_or",
        "torch.logical_not",
        "torch.abs",
        "torch.logical_xor",
        "torch.tril",
        "torch.triu",
        "torch.where",
        "torch.from_numpy",
        "torch.as_tensor",
        "torch.tensor",
        "torch.nn.Parameter",
        "torch.cat",
        "torch.stack",
    }
)
# Words of an identifier that make it a padding or length mask, or a length (`src_lengths`,
# `attention_mask`, `pad_idx`, `ignore_index`): empty only for an input with no tokens.
_PADDING_WORDS = frozenset(
    {
        "pad",
        "pads",
        "padding",
        "padded",
        "ignore",
        "ignored",
        "length",
        "lengths",
        "len",
        "lens",
        "lengths",
        "seqlen",
        "seqlens",
        "ilens",
        "olens",
        "attention",
        "attn",
        "token",
        "tokens",
        "src",
        "tgt",
        "seq",
        "input",
        "inputs",
        "key",
        "query",
        "eos",
        "bos",
        "sep",
    }
)
# Words that make it a selection that real batches can leave empty (positives, matched anchors,
# visible keypoints, validity flags from the data, what a filter keeps).
_SELECTION_WORDS = frozenset(
    {
        "pos",
        "positive",
        "positives",
        "neg",
        "negative",
        "negatives",
        "fg",
        "foreground",
        "bg",
        "background",
        "matched",
        "match",
        "matches",
        "inlier",
        "inliers",
        "outlier",
        "outliers",
        "visible",
        "vis",
        "visibility",
        "selected",
        "sel",
        "select",
        "keep",
        "kept",
        "hit",
        "hits",
        "valid",
        "validity",
        "sampled",
        "picked",
        "chosen",
        "found",
        "detected",
        "occupied",
        "active",
        "dropped",
        "drop",
    }
)
# Words that say "selection" alone (`matched`, `fg`); the others need a mask-like word beside them
# (`pos_mask`, `keep_inds`: `pos` alone is a position).
_STRONG_SELECTION_WORDS = frozenset(
    {"positive", "positives", "negative", "negatives", "fg", "foreground", "bg", "background", "matched", "inlier", "inliers", "visible"}
)
_MASK_LIKE = frozenset({"mask", "masks", "idx", "inds", "ind", "index", "indices", "flag", "flags", "sel"})
# Words that make a compared value a label or class, so `==`/`!=` selects a class.
_LABEL_WORDS = frozenset(
    {
        "label",
        "labels",
        "lbl",
        "lbls",
        "target",
        "targets",
        "tgts",
        "cls",
        "class",
        "classes",
        "category",
        "categories",
        "cat",
        "cats",
        "gt",
        "tag",
        "tags",
        "y",
        "segm",
        "seg",
        "semantic",
        "instance",
        "instances",
    }
)
# Words that make a compared value a threshold (`scores > self.score_thresh`).
_THRESHOLD_WORDS = frozenset(
    {
        "thr",
        "thresh",
        "threshold",
        "thresholds",
        "thres",
        "margin",
        "radius",
        "cutoff",
        "tol",
        "tolerance",
        "limit",
        "rate",
        "ratio",
        "quantile",
        "eps",
    }
)
# Words that name a pairwise similarity whose largest value is an element's with itself.
_SIMILARITIES = frozenset({"iou", "giou", "diou", "ciou", "overlaps", "similarity"})
_RANDOM = frozenset(
    {
        "torch.rand",
        "torch.rand_like",
        "torch.randn",
        "torch.randn_like",
        "torch.bernoulli",
        "torch.randint",
        "torch.randperm",
        "torch.multinomial",
        "numpy.random.rand",
        "numpy.random.random",
        "random.random",
    }
)
_REDUCTIONS = frozenset({"sum", "norm", "abs", "count_nonzero", "amax", "max", "any", "all", "mean"})
_COMPARISONS = frozenset({"eq", "ne", "gt", "ge", "lt", "le", "greater", "less", "greater_equal", "less_equal"})
_BUILTINS = frozenset({"range", "min", "max", "int", "float", "abs", "enumerate", "zip", "round"})
_DEPTH = 12


def origin(ctx: "FileContext", mask: cst.BaseExpression) -> Origin:
    """Where `mask` comes from (see the module)."""
    return _Search(ctx).of(mask, 0)


def _combine(origins: Iterable[Origin]) -> Origin:
    """The first evidence among `origins`; else bounded, padding or constant as they all agree
    (padding where one is padding and the rest constant)."""
    found = list(origins)
    for one in found:
        if one.why is not None:
            return one
    if found and all(one.bounded or one.constant for one in found) and any(one.bounded for one in found):
        return BOUNDED
    padding = next((one.padding for one in found if one.padding is not None), None)
    if padding is not None and all(one.padding is not None or one.constant for one in found):
        return Origin(padding=padding)
    return CONSTANT if all(one.constant for one in found) else UNKNOWN


def _named(ident: str, known: Origin) -> Origin:
    """What a name says where its construction says nothing: a padding or length mask
    (`attention_mask`, `src_lengths`), or a selection (`pos_mask`, `matched`, `valid`)."""
    if known.why is not None or known.constant or known.bounded or known.padding is not None:
        return known
    said = words(ident)
    if said & _PADDING_WORDS:
        return Origin(padding=f"`{ident}` is a padding or length mask")
    if said & _STRONG_SELECTION_WORDS or said & _SELECTION_WORDS and said & _MASK_LIKE:
        return Origin(why=f"`{ident}` selects by its name ({_selection_word(said)}), which a batch can lack entirely")
    return known


def _selection_word(said: Set[str]) -> str:
    return sorted(said & _SELECTION_WORDS)[0]


class _Search:
    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx
        self.known: Dict[int, Optional[Origin]] = {}
        self.written: Dict[int, cst.CSTNode] = {}

    def of(self, expr: cst.BaseExpression, depth: int) -> Origin:
        """What `expr` is made from; a node met again gives its first answer (a loop back, while
        it is still being asked, gives nothing)."""
        if depth > _DEPTH:
            return UNKNOWN
        key = id(expr)
        if key in self.known:
            return self.known[key] or UNKNOWN
        self.known[key] = None
        bare = strip_parens(expr)
        self.written[id(bare)] = expr  # the node in the module, where its line is known
        self.known[key] = found = self.made(bare, depth)
        return found

    def line(self, node: cst.CSTNode) -> str:
        return _line(self.ctx, self.written.get(id(node), node))

    def made(self, expr: cst.BaseExpression, depth: int) -> Origin:
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.Ellipsis)) or any(
            is_literal(expr, word) for word in ("True", "False", "None")
        ):
            return CONSTANT
        if isinstance(expr, cst.Name):
            return self.name(expr, depth)
        if isinstance(expr, cst.Attribute):
            return self.attribute(expr, depth)
        if isinstance(expr, cst.Subscript):
            return self.subscript(expr, depth)
        if isinstance(expr, cst.Call):
            return self.call(expr, depth)
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            operator = expr.comparisons[0].operator
            if not isinstance(operator, (cst.In, cst.NotIn)):
                equality = isinstance(operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot))
                return self.comparison(expr, _operands(expr), equality, depth)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
            either = [self.of(part, depth + 1) for part in _operands(expr)]
            if any(one.bounded for one in either):
                return BOUNDED  # `mask | eye`: the diagonal is always kept
            return _combine(either)
        return self.all_of(_operands(expr), depth)

    def all_of(self, parts: Sequence[cst.BaseExpression], depth: int) -> Origin:
        return _combine(self.of(part, depth + 1) for part in parts) if parts else UNKNOWN

    def name(self, expr: cst.Name, depth: int) -> Origin:
        if expr.value in ("self", "cls"):
            return UNKNOWN
        found = ways(self.ctx, expr)
        if found is None:
            return _named(expr.value, UNKNOWN)
        if any(_sets_every_row(way.value) for way in found):
            return BOUNDED  # `mask[:, 0] = True`: one entry of every row is always kept
        return _named(expr.value, _combine(self.way(way.value, way.binding, depth) for way in found))

    def way(self, value: cst.CSTNode, binding, depth: int) -> Origin:
        if isinstance(value, cst.Param):
            return self.param(value)
        if isinstance(value, cst.BaseExpression):
            return self.of(value, depth + 1)
        if binding is not None and binding.unpacked is not None:  # `mask, lengths = batch`
            return self.of(binding.unpacked[0], depth + 1)
        if isinstance(value, cst.For):  # `for i, n in enumerate(lengths)`
            return self.of(value.iter, depth + 1)
        if isinstance(value, cst.Assign) and isinstance(value.targets[0].target, cst.Subscript):
            # `mask[i, n:] = True`: where it is changed and to what (the rest is the earlier way)
            target = value.targets[0].target
            return self.all_of(list(_slice_parts(target)) + [value.value], depth)
        return UNKNOWN

    def param(self, param: cst.Param) -> Origin:
        func = next(
            (
                node
                for node in reversed(self.ctx.stack)
                if isinstance(node, cst.FunctionDef) and any(p is param for p in all_params(node.params))
            ),
            None,
        )
        name = param.name.value
        if func is None or name in ("self", "cls"):
            return UNKNOWN
        if func.name.value == "__init__" and not says_mask(name):  # a module's options: sizes, flags, ranges
            return CONSTANT
        named = _named(name, UNKNOWN)
        if named.why is not None:
            return Origin(why=f"{named.why}; it is given to `{func.name.value}`")
        if named.padding is not None:
            return named
        return self.from_callers(func, param)

    def from_callers(self, func: cst.FunctionDef, param: cst.Param) -> Origin:
        """A parameter is what its callers in the project pass: one caller's selection is evidence,
        named with the caller's line; padding or constants from every caller are what they are."""
        passed: List[Origin] = []
        for caller in callers(self.ctx):
            arg = caller.argument(func, param)
            if arg is None:
                return UNKNOWN
            with caller.ctx.visiting(caller.path + (arg, arg.value)):
                found = _Search(caller.ctx).of(arg.value, 0)
            if found.why is not None:
                return Origin(why=f"{found.why}, passed to `{func.name.value}` by the call ({caller.where})")
            passed.append(found)
        return _combine(passed) if passed else UNKNOWN

    def comparison(self, node: cst.BaseExpression, operands: Sequence[cst.BaseExpression], equality: bool, depth: int) -> Origin:
        """`a == b`, `a > b` (operator or method form): a class picked from labels or values past a
        threshold select what a batch can lack; a range or length comparison, or non-zero rows,
        is padding."""
        known = [self.of(operand, depth + 1) for operand in operands]
        if all(one.constant for one in known):
            return CONSTANT
        text = _short(self.ctx, node)
        if any(one.padding is not None for one in known) or any(self._lengthy(o) for o in operands):
            return Origin(padding=f"`{text}` is a padding or length mask")
        evidence = next((one for one in known if one.why is not None), None)
        if evidence is not None:
            return evidence
        line = self.line(node)
        if (
            equality and any(self._range(o) for o in operands) and any(words(_identifier(o)) & _LABEL_WORDS for o in operands)
        ):  # `labels[:, None] == torch.arange(C)`: a one-hot, whose column for an absent class is empty
            return Origin(why=f"`{text}`{line} compares labels with every class, and a batch can lack one")
        if any(says_mask(_identifier(o)) or self._range(o) for o in operands):
            return _combine(known)  # `attention_mask > 0`, `mask == 1`: the mask as it was
        if (
            (equality or _non_negative_test(node))
            and any((_number_of(o) or 0) < 0 for o in operands)
            or (_non_negative_test(node) and any(_number_of(o) == 0 for o in operands))
        ):
            return Origin(padding=f"`{text}` leaves out an ignore index")  # `labels != -100`, `idx >= 0`
        if not equality and _tolerance(operands):
            equality = True  # `(a - b).abs() < 1e-6`: a test of equality, not a threshold
        if equality:
            if any(words(_identifier(o)) & _LABEL_WORDS for o in operands):
                return Origin(why=f"`{text}`{line} picks one class, which a batch can lack")
            return _combine(known)
        if any(self._random(o) for o in operands):
            return Origin(why=f"`{text}`{line} is a random draw, which can keep nothing")
        if any(self._reduced(o) for o in operands) and any(_number_of(o) == 0 for o in operands):
            return Origin(padding=f"`{text}` marks non-zero rows")
        if _self_similarity_above(node):
            return BOUNDED  # `box_iou(boxes[i], boxes) > t`: each row holds a box's IoU with itself, 1
        thresholds = [_number_of(o) is not None or bool(words(_identifier(o)) & _THRESHOLD_WORDS) for o in operands]
        if any(thresholds) and any(not t and not k.constant for t, k in zip(thresholds, known)):
            return Origin(why=f"`{text}`{line} keeps the values past a threshold, which can be none")
        return _combine(known)

    def _lengthy(self, expr: cst.BaseExpression) -> bool:
        """A length (`arange(T) < lengths[:, None]`, `pos >= valid_len`)."""
        return bool(words(_identifier(expr)) & {"length", "lengths", "len", "lens", "seqlen", "seqlens", "ilens", "olens"})

    def _range(self, expr: cst.BaseExpression) -> bool:
        """Positions (`arange(T)[None]`): compared with anything, a window or a step, not a
        selection of values."""
        expr = strip_parens(expr)
        while isinstance(expr, cst.Subscript):
            expr = strip_parens(expr.value)
        call = _call_through_methods(expr)
        return call is not None and self.ctx.qualname(call.func) == "torch.arange"

    def _random(self, expr: cst.BaseExpression) -> bool:
        call = _call_through_methods(strip_parens(expr))
        if call is None:
            return False
        if self.ctx.qualname(call.func) in _RANDOM:
            return True
        func = call.func
        return isinstance(func, cst.Attribute) and func.attr.value in ("uniform_", "bernoulli_", "random_")

    def _reduced(self, expr: cst.BaseExpression) -> bool:
        expr = strip_parens(expr)
        return isinstance(expr, cst.Call) and _identifier(expr.func) in _REDUCTIONS

    def attribute(self, expr: cst.Attribute, depth: int) -> Origin:
        if expr.attr.value in _SIZE_ATTRIBUTES:
            return CONSTANT
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            assigned = self.assignments(expr.attr.value)
            known = UNKNOWN
            if assigned:
                known = _combine(self.elsewhere(path, depth) for path in assigned)
            return _named(expr.attr.value, known)
        return _named(expr.attr.value, self.of(expr.value, depth + 1))

    def subscript(self, expr: cst.Subscript, depth: int) -> Origin:
        known = self.of(expr.value, depth + 1)
        key = expr.slice[0].slice if len(expr.slice) == 1 else None
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):  # `batch["pad_mask"]`
            text = key.value.evaluated_value
            if isinstance(text, str):
                return _named(text, known)
        return known

    def call(self, expr: cst.Call, depth: int) -> Origin:
        ctx = self.ctx
        args = [arg.value for arg in expr.args]
        qual = ctx.qualname(expr.func)
        if qual == "torch.eye":
            return BOUNDED  # a diagonal: one entry of every row
        if qual in _CONSTRUCTORS:
            return CONSTANT
        if qual is not None and qual.startswith("torch.") and qual[6:] in _COMPARISONS and len(args) == 2:
            return self.comparison(expr, args, qual[6:] in ("eq", "ne"), depth)
        if qual in _RANDOM:
            return Origin(why=f"`{_short(ctx, expr)}`{self.line(expr)} is a random draw, which can keep nothing")
        if qual in _ELEMENTWISE_FUNCTIONS:
            return self.all_of(args, depth)
        if isinstance(expr.func, cst.Name) and qual is None:
            if expr.func.value == "len":
                return CONSTANT
            if expr.func.value in _BUILTINS:
                return self.all_of(args, depth)
        func = expr.func
        if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
            method = func.attr.value
            if method in _SIZE_METHODS:
                return CONSTANT
            if method in _NEW_TENSOR:
                return CONSTANT
            if method in _KEEPS_RECEIVER:
                return self.of(func.value, depth + 1)
            if method in _COMPARISONS and len(args) == 1:
                return self.comparison(expr, [func.value, args[0]], method in ("eq", "ne"), depth)
            if method == "fill_diagonal_":
                return BOUNDED
            if method in _ELEMENTWISE_METHODS:
                return self.all_of([func.value] + args, depth)
            parts = args if isinstance(func.value, cst.Name) and func.value.value == "self" else [func.value] + args
            return self.helper(self.all_of(parts, depth))
        return self.helper(self.all_of(args, depth))

    def helper(self, known: Origin) -> Origin:
        """A call of something unknown (a helper, a submodule): evidence from its arguments, but a
        constant argument says nothing of what the helper makes of it, except in `__init__`,
        where a helper of options (`self._normalize(weights)`) makes configuration."""
        if known.constant:
            function = self.ctx.enclosing(cst.FunctionDef)
            return CONSTANT if function is not None and function.name.value == "__init__" else UNKNOWN
        return _helper(known)

    def assignments(self, attr: str) -> List[List[cst.CSTNode]]:
        """The paths (ancestors, value last) of every value `self.<attr>` is given in the class
        around the node being visited: `self.attr = v` and `self.register_buffer("attr", v)`."""
        ctx = self.ctx
        cls = ctx.enclosing(cst.ClassDef)
        if cls is None:
            return []
        table = ctx.per_file(f"masking-self-assignments-{id(cls)}", lambda _: _self_assignments(cls))
        outer = ctx.stack[: next(i for i, node in enumerate(ctx.stack) if node is cls) + 1]
        return [outer + [method, value] for method, value in table.get(attr, ())]

    def elsewhere(self, path: List[cst.CSTNode], depth: int) -> Origin:
        with self.ctx.visiting(path):
            return self.of(path[-1], depth + 1)  # type: ignore[arg-type]  # a caller's path ends at an expression


def _helper(known: Origin) -> Origin:
    """A call of something unknown (a helper, a submodule): evidence from its arguments, but a
    constant argument says nothing of what the helper makes of it."""
    return known if known.why is not None else UNKNOWN


def _operands(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.BooleanOperation):
        return [expr.left, expr.right]
    if isinstance(expr, cst.UnaryOperation):
        return [expr.expression]
    if isinstance(expr, cst.Comparison):
        return [expr.left] + [target.comparator for target in expr.comparisons]
    if isinstance(expr, cst.IfExp):
        return [expr.body, expr.orelse]
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [element.value for element in expr.elements]
    return []


def _slice_parts(target: cst.Subscript) -> Iterable[cst.BaseExpression]:
    for element in target.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            yield part.value
        elif isinstance(part, cst.Slice):
            yield from (bound for bound in (part.lower, part.upper, part.step) if bound is not None)


def _self_assignments(cls: cst.ClassDef) -> dict:
    """attr -> [(method, value)] for the methods defined in `cls`'s body."""
    found: dict = {}
    for method in cls.body.body:
        if isinstance(method, cst.FunctionDef):
            _Assignments(method, found).walk(method)
    return found


class _Assignments(Visitor):
    def __init__(self, method: cst.FunctionDef, found: dict) -> None:
        self.method, self.found = method, found

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is not self.method and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self.add(target.target, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.add(node.target, node.value)
        elif isinstance(node, cst.Call):
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "register_buffer"
                and is_literal(func.value, "self")
                and len(node.args) >= 2
                and isinstance(node.args[0].value, cst.SimpleString)
            ):
                name = node.args[0].value.evaluated_value
                if isinstance(name, str):
                    self.found.setdefault(name, []).append((self.method, node.args[1].value))
        return True

    def add(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute) and is_literal(target.value, "self"):
            self.found.setdefault(target.attr.value, []).append((self.method, value))


def _identifier(expr: cst.CSTNode) -> Optional[str]:
    """The last identifier of a name, attribute, subscript's value or call's callee: `labels` of
    `batch.labels[:, 0]`, `score_thr` of `self.cfg.score_thr`."""
    for _ in range(6):
        expr = strip_parens(expr) if isinstance(expr, cst.BaseExpression) else expr
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Attribute):
            return expr.attr.value
        if isinstance(expr, cst.Subscript):
            key = expr.slice[0].slice if len(expr.slice) == 1 else None
            if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):
                text = key.value.evaluated_value
                return text if isinstance(text, str) else None
            expr = expr.value
            continue
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _KEEPS_RECEIVER:
            expr = expr.func.value
            continue
        return None
    return None


def _call_through_methods(expr: cst.BaseExpression) -> Optional[cst.Call]:
    """The innermost call of a method chain (`torch.rand(n).to(x)` -> `torch.rand(n)`)."""
    call = None
    while isinstance(expr, cst.Call):
        call = expr
        func = expr.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            expr = func.value
            continue
        break
    return call


def _self_similarity_above(node: cst.BaseExpression) -> bool:
    """`sim(x[i], x) > t` (or `t < sim(x, x)`): a pairwise similarity (IoU, overlaps, cosine) of
    a set with itself or a part of it, kept where it passes a threshold. Every row compares one
    element with itself, at the largest similarity there is (an IoU of 1), so no row is empty
    for a threshold below it: merge-NMS weights, duplicate grouping."""
    node = strip_parens(node)
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
        return False
    target = node.comparisons[0]
    if isinstance(target.operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        sim = node.left
    elif isinstance(target.operator, (cst.LessThan, cst.LessThanEqual)):
        sim = target.comparator
    else:
        return False
    call = strip_parens(sim)
    if not isinstance(call, cst.Call) or not words(_identifier(call.func)) & _SIMILARITIES:
        return False
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(positional) < 2:
        return False
    first, second = (_set_root(v) for v in positional[:2])
    return first is not None and first == second


def _set_root(expr: cst.BaseExpression) -> Optional[str]:
    """The name a value indexes into (`boxes` of `boxes[i]`, `self.anchors` of `self.anchors[k]`)."""
    expr = strip_parens(expr)
    while isinstance(expr, cst.Subscript):
        expr = strip_parens(expr.value)
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return f"{expr.value.value}.{expr.attr.value}"
    return None


def _short(ctx: "FileContext", node: cst.CSTNode) -> str:
    text = " ".join(ctx.module.code_for_node(node).split())
    return text if len(text) <= 48 else text[:45] + "..."


def _line(ctx: "FileContext", node: cst.CSTNode) -> str:
    span = ctx.positions.get(node)
    return f" (line {span.start.line})" if span is not None else ""


def _sets_every_row(value: cst.CSTNode) -> bool:
    """`m[:, 0] = True`, `m[..., -1] = 1`, `m[torch.arange(b), idx] = True`: an assignment that
    sets one entry of every row."""
    if not (isinstance(value, cst.Assign) and len(value.targets) == 1):
        return False
    target = value.targets[0].target
    if not isinstance(target, cst.Subscript) or not (is_literal(value.value, "True") or _number_of(value.value) == 1):
        return False
    parts = [element.slice for element in target.slice]
    whole = [
        isinstance(p, cst.Slice)
        and p.lower is None
        and p.upper is None
        or isinstance(p, cst.Index)
        and isinstance(p.value, (cst.Ellipsis, cst.Call))
        for p in parts
    ]
    fixed = [isinstance(p, cst.Index) and isinstance(strip_parens(p.value), (cst.Integer, cst.UnaryOperation, cst.Name)) for p in parts]
    return len(parts) >= 2 and whole[0] and any(fixed[1:])


def _non_negative_test(node: cst.BaseExpression) -> bool:
    """`x >= 0` or `x > -1` (operator form): the entries that are not an ignore marker."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        operator = node.comparisons[0].operator
        right = _number_of(node.comparisons[0].comparator)
        return (isinstance(operator, cst.GreaterThanEqual) and right == 0) or (isinstance(operator, cst.GreaterThan) and right == -1)
    return False


def _tolerance(operands: Sequence[cst.BaseExpression]) -> bool:
    """`(a - b).abs() < tol` / `torch.abs(a - b) < 1e-6`: closeness of two values."""
    first = strip_parens(operands[0])
    if not isinstance(first, cst.Call):
        return False
    func = first.func
    inner = None
    if isinstance(func, cst.Attribute) and func.attr.value == "abs" and not first.args:
        inner = strip_parens(func.value)
    elif isinstance(func, (cst.Attribute, cst.Name)) and _identifier(func) == "abs" and first.args:
        inner = strip_parens(first.args[0].value)
    return isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract)


def _number_of(expr: cst.BaseExpression) -> Optional[float]:
    return number_value(strip_parens(expr))
