"""TNL1xx, logs of probabilities: `log(softmax(x))` and `log(sigmoid(x))` (or `log(1 - sigmoid(x))`),
whose probabilities underflow to exactly 0 long before the log-probabilities stop being finite.

Both rules look at a `log` call (`torch.log(v)`, `v.log()`, `from torch import log`) and ask what
its input is: a softmax (TNL103) or a sigmoid / `1 - sigmoid` (TNL104), written inline or through a
name with a single assignment in the same scope. A guarded input (`+ eps`, `.clamp_min(eps)`,
`clamp(min=...)`, `torch.maximum`, an in-place clamp of the name, a second assignment) is never one
of those shapes, so it is never flagged.

Fixes: inline, the call is rewritten in place. Through a name `p = F.softmax(x, d)`:
- read only by this log: the assignment becomes `p = F.log_softmax(x, d)` and `torch.log(p)` is `p`;
- read elsewhere too (entropy `p * torch.log(p)`): `torch.log(p)` becomes `F.log_softmax(x, d)`,
  only when `x` and `d` are plain expressions (names, attributes, literals, arithmetic, indexing)
  that nothing rebinds after the assignment, so the recomputation is the same value;
- otherwise the finding has no fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.guards import gradient_free, is_detached, number_value, strip_parens
from torchnumlint.rules.names import Binding, CallMatch, match_call
from torchnumlint.rules.rewrite import negated, renamed_call, renamed_func, with_input
from torchnumlint.walk import Visitor

# Plain names followed (`q = p`, `p = F.softmax(x, -1)`); never `self.attr`, whose assignment
# lives in another method and can be changed in place where we cannot see it.
_MAX_CHAIN = 4


def _chain(ctx, expr: cst.BaseExpression) -> List[Binding]:
    return ctx.chain(expr, _MAX_CHAIN, names_only=True)


def _resolved(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    return strip_parens(ctx.resolve(expr, _MAX_CHAIN, names_only=True))


# ---------------------------------------------------------------------------------------------
# What the log's value is used for
#
# -inf log-probabilities are harmless where they are only ranked (beam search, greedy decoding,
# top-k) and no gradient flows; a loss built from them is Inf, a product with them NaN. The
# message says which, and a ranking in gradient-free code is not reported.

# rankings that return values (a gradient flows through them), and ones that return only indices
_RANKING = frozenset({"topk", "sort", "msort", "max", "min", "kthvalue"})
_INDEXING = frozenset({"argmax", "argmin", "argsort"})
_TORCH_RANKING = {f"torch.{name}": "rank" for name in _RANKING} | {f"torch.{name}": "index" for name in _INDEXING}
# methods whose result holds the same values, or a selection of them: the use is the result's
_SAME_VALUES = frozenset({
    "view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "t", "contiguous", "flatten",
    "expand", "expand_as", "repeat", "float", "double", "half", "to", "type_as", "clone", "cpu",
    "cuda", "detach", "gather", "index_select", "masked_fill",
})
_SHAPE = frozenset({"shape", "size", "dim", "ndim", "dtype", "device", "numel"})
_REDUCTIONS = frozenset({"sum", "mean"})
_TORCH_REDUCTIONS = frozenset({"torch.sum", "torch.mean"})
_HARMLESS = frozenset({"rank", "index", "write", "shape"})
_MAX_FOLLOW = 3  # names followed forward: `logp = log(p)`, `total = scores + logp`, ...
_BLOCKS = (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)
_LOOPS = (cst.For, cst.While)
_NESTED = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_ASSIGNS = (cst.Assign, cst.AnnAssign, cst.NamedExpr)
Path = Tuple[cst.CSTNode, ...]


def _sink(ctx, path: Sequence[cst.CSTNode]) -> Union[str, cst.Name]:
    """What the value at `path[-1]` (its ancestors before it) ends up as, through operations that
    keep an -inf an -inf (`+`, `-`, `/`, indexing, views): "rank" (`topk`, `max`, `sort`),
    "index" (`argmax`, `argsort`, a comparison: no gradient), "write" (the target of an
    indexed assignment), "shape", "loss" (`nll_loss`, `sum`, `mean`), "product" (`*`: 0 * -inf),
    "other"; or the Name that a plain `name = value` binds."""
    i = len(path) - 1  # path[i] is the value followed
    while i >= 2:
        child, parent, grand = path[i], path[i - 1], path[i - 2]
        i -= 1
        if isinstance(parent, cst.Attribute) and parent.value is child:
            method = parent.attr.value
            if method in _SHAPE:
                return "shape"
            if not (isinstance(grand, cst.Call) and grand.func is parent):
                return "other"
            if method in _RANKING or method in _INDEXING:
                return "rank" if method in _RANKING else "index"
            if method in _REDUCTIONS:
                return "loss"
            if method not in _SAME_VALUES:
                return "other"
            i -= 1  # the method call's result
        elif isinstance(parent, cst.Arg) and isinstance(grand, cst.Call) and parent.value is child:
            first = grand.args[0] is parent
            qual = ctx.qualname(grand.func)
            if first and qual in _TORCH_RANKING:
                return _TORCH_RANKING[qual]
            nll = match_call(ctx.imports, grand, "nll_loss")
            return "loss" if (first and qual in _TORCH_REDUCTIONS) or (nll is not None and nll.input is child) else "other"
        elif isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, cst.Multiply):
                return "product"
            if not isinstance(parent.operator, (cst.Add, cst.Subtract, cst.Divide)):
                return "other"
        elif (isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus)) or (
            isinstance(parent, cst.Subscript) and parent.value is child
        ):
            continue
        elif isinstance(parent, cst.AssignTarget):
            return "write"
        elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return "index"
        elif isinstance(parent, cst.Assign) and parent.value is child:
            targets = parent.targets
            return targets[0].target if len(targets) == 1 and isinstance(targets[0].target, cst.Name) else "other"
        else:
            return "other"
    return "other"


@dataclass
class _NameUse:
    path: Path  # ancestors from the scope down, the Name last
    store: bool  # binds the name: an assignment target, a loop variable, a parameter
    nested: bool  # inside a nested function, lambda or class


class _NameUses(Visitor):
    """Every mention of every name in one function, in execution order (an assignment binds its
    targets after its value is read), with its ancestors."""

    def __init__(self, scope: cst.CSTNode) -> None:
        super().__init__()
        self.scope = scope
        self.stack: List[cst.CSTNode] = []
        self.uses: Dict[str, List[_NameUse]] = {}
        self.pending: List[Tuple[cst.CSTNode, str, _NameUse]] = []  # targets of unfinished assignments
        self.nested = 0
        self.walk(scope)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, _NESTED) and node is not self.scope:
            self.nested += 1
        if isinstance(node, cst.Name) and len(self.stack) > 1:
            parent = self.stack[-2]
            if not (isinstance(parent, cst.Attribute) and parent.attr is node) and not (
                isinstance(parent, cst.Arg) and parent.keyword is node
            ):
                use = _NameUse(tuple(self.stack), _is_store(self.stack), self.nested > 0)
                assign = _innermost(self.stack, _ASSIGNS) if use.store else None
                if assign is not None:
                    self.pending.append((assign, node.value, use))
                else:
                    self.uses.setdefault(node.value, []).append(use)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if isinstance(node, _NESTED) and node is not self.scope:
            self.nested -= 1
        if isinstance(node, _ASSIGNS):
            for assign, name, use in [p for p in self.pending if p[0] is node]:
                self.uses.setdefault(name, []).append(use)
            self.pending = [p for p in self.pending if p[0] is not node]
        self.stack.pop()


def _is_store(stack: Sequence[cst.CSTNode]) -> bool:
    """Whether the Name at `stack[-1]` is bound there (through tuple unpacking). `x += v` is a
    read: the value goes on."""
    child = stack[-1]
    for node in reversed(stack[:-1]):
        if isinstance(node, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            child = node
            continue
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            return node.target is child
        if isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
            return node.name is child
        return isinstance(node, (cst.AsName, cst.Import, cst.ImportFrom, cst.ImportAlias, cst.Global, cst.Nonlocal))
    return False


def _innermost(path: Sequence[cst.CSTNode], types) -> Optional[cst.CSTNode]:
    return next((n for n in reversed(path) if isinstance(n, types)), None)


def _reads_of(ctx, target: cst.Name) -> Optional[List[Path]]:
    """The reads that can see the value a function-local `name = value` binds: after it up to
    an unconditional rebinding and, in a loop, at the top of the body before the name is bound
    again. None when that is unknown: a module global, a name a nested scope reads."""
    scope_uses = ctx.per_scope("tnl1-name-uses", lambda scope: _NameUses(scope) if isinstance(scope, cst.FunctionDef) else None)
    if scope_uses is None:
        return None
    events = scope_uses.uses.get(target.value, [])
    at = next((i for i, e in enumerate(events) if e.path[-1] is target), None)
    if at is None:
        return None
    blocks = {id(n) for n in events[at].path if isinstance(n, _BLOCKS)}
    reads: List[Path] = []

    def scan(seq: Sequence[_NameUse]) -> bool:
        for event in seq:
            if event.nested:
                return False
            if event.store:
                if id(_innermost(event.path, _BLOCKS)) in blocks:
                    break
                continue
            reads.append(event.path)
        return True

    loop = _innermost(events[at].path, _LOOPS)
    if not scan(events[at + 1 :]):
        return None
    if loop is not None and not scan([e for e in events[:at] if any(n is loop for n in e.path)]):
        return None
    return reads


def _uses(ctx, path: Sequence[cst.CSTNode], depth: int = 0) -> Set[str]:
    """What the value at `path[-1]` is used for (see `_sink`), following the names it is bound
    to forward; "other" stands for anything not understood."""
    sink = _sink(ctx, path)
    if isinstance(sink, str):
        return {sink}
    reads = _reads_of(ctx, sink) if depth < _MAX_FOLLOW else None
    if not reads:
        return {"other"}
    return set().union(*(_uses(ctx, read, depth + 1) for read in reads))


def only_ranked(ctx, uses: Set[str]) -> bool:
    """-inf log-probabilities that are only compared, sorted or top-k'd (search, decoding): they
    rank last, as they should. The values of `topk`/`max`/`sort` carry a gradient, so those count
    only where none flows; indices (`argmax`, `argsort`, a comparison) never carry one."""
    if not uses <= _HARMLESS or not uses & {"rank", "index"}:
        return False
    return "rank" not in uses or gradient_free(ctx)


# ---------------------------------------------------------------------------------------------
# What a log reads


@dataclass
class _Site:
    """A log whose input (past an optional index/gather wrapper) is a hazardous probability."""

    log: cst.Call
    source: CallMatch  # the softmax / sigmoid call
    build: Callable[[object], Optional[cst.BaseExpression]]  # fix -> the log-space replacement of core
    core: cst.BaseExpression  # what the log (or its wrapper) reads: the call, an expression or a name
    chain: List[Binding]  # the names followed from `core` to the source
    wrap: Optional[Callable[[cst.BaseExpression], cst.BaseExpression]] = None
    negate: bool = False  # TNL104: log(1 - sigmoid(x))


class _LogRule(Rule):
    """The common part: find `log(v)`, classify v, choose inline / assignment / no fix."""

    def _log_input(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        match = match_call(self.ctx.imports, node, "log")
        if match is None or not match.fully_known:
            return None
        # No `is_guarded` test: an input that is exactly a softmax / sigmoid (or a name whose one
        # assignment is) is unguarded by construction, and `+ eps`, `clamp_min`, `clamp(min=)`,
        # `torch.maximum`, `where` or a second assignment are never that shape. (`is_guarded`
        # would also call `softmax(s.masked_fill(m, finfo.min))` guarded, which is the hazard.)
        return match.input

    def _core_fix(self, fix, site: _Site) -> Tuple[Optional[cst.BaseExpression], Optional[str]]:
        """The replacement for `site.core` in log space, adding edits to `fix` (None: no fix), and
        the name whose assignment the fix turns into log-probabilities, if it does."""
        if not site.chain:
            return site.build(fix), None
        name = strip_parens(site.core)
        first = site.chain[0]
        if (
            isinstance(name, cst.Name)
            and len(site.chain) == 1
            and first.rewritable
            and self.ctx.only_read_here(name)
        ):
            new = site.build(fix)
            if new is None:
                return None, None
            fix.replace(first.value, new)
            return name, name.value
        parts = [site.source.input] + [a.value for a in site.source.args.values()]
        if not self.ctx.unchanged_since(parts, site.chain):
            return None, None
        return site.build(fix), None

    def _fix_for(self, site: _Site):
        """The fix and the message's note: a name it turns into log-probabilities is named, since
        the name (`probs`) no longer says what it holds."""
        fix = self.fix()
        core, renamed = self._core_fix(fix, site)
        if core is None:
            return None, ""
        new = site.wrap(core) if site.wrap is not None else core
        fix.replace(site.log, strip_parens(new))
        return fix, renamed_note(renamed)


def renamed_note(name: Optional[str]) -> str:
    """The message's note for a fix that rewrites `name = softmax(...)` into log space."""
    return f" (the fix makes `{name}` hold log-probabilities)" if name else ""


# ---------------------------------------------------------------------------------------------
# TNL103


def _log_softmax_builder(match: CallMatch):
    def build(fix) -> Optional[cst.BaseExpression]:
        return strip_parens(renamed_call(fix, match, "log_softmax"))

    return build


class LogOfSoftmax(_LogRule):
    code = "TNL103"
    name = "log-of-softmax"
    message = "log of a softmax {hazard}; use {use}{note}"
    rationale = (
        "`softmax` rounds probabilities below the smallest subnormal to exactly 0, and the log of "
        "those is -inf: a loss built from it (`nll_loss`, a sum of log-likelihoods) is Inf, a "
        "product with it (`0 * log 0` in an entropy or with one-hot targets) is NaN in the forward "
        "pass, and the gradient is NaN either way. Measured on torch 2.13 (CPU): a probability is "
        "exactly 0 from a logit spread of 104.0 in float32, 17.3 in float16 and 92.8 in bfloat16 "
        "(two classes; with 32000 classes 93.6, 7.0 and 82.8), spreads that saturated or "
        "diverging models reach. `log_softmax` computes `x - logsumexp(x)` directly and stays "
        "finite at any spread; `F.nll_loss(torch.log(F.softmax(x, 1)), y)` is exactly "
        "`F.cross_entropy(x, y)`. The fix keeps the dim and dtype the user passed; a softmax "
        "without an explicit dim (deprecated, its dim is guessed) is reported without a fix. "
        "Log-probabilities that are only ranked (`topk`, `argmax`, `sort`, beam scores) where no "
        "gradient flows are left alone: an -inf there ranks last, as it should."
    )
    safety = Safety.SAFE
    needles = ("softmax",)
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def log_probs(logits):\n"
                "    return torch.log(F.softmax(logits, dim=-1))\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def log_probs(logits):\n"
                "    return F.log_softmax(logits, dim=-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def loss_fn(logits, labels, w):\n"
                "    return nn.functional.nll_loss(\n"
                "        torch.log(nn.functional.softmax(logits, 1)),\n"
                "        labels,\n"
                "        weight=w,\n"
                '        reduction="sum",\n'
                "    )\n"
            ),
            lines=(7,),
            fixed=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def loss_fn(logits, labels, w):\n"
                "    return nn.functional.cross_entropy(\n"
                "        logits,\n"
                "        labels,\n"
                "        weight=w,\n"
                '        reduction="sum",\n'
                "    )\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "\n"
                "\n"
                "def entropy(logits, T):\n"
                "    p = (logits / T).softmax(-1)\n"
                "    return -(p * p.log()).sum(-1)\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "\n"
                "\n"
                "def entropy(logits, T):\n"
                "    p = (logits / T).softmax(-1)\n"
                "    return -(p * (logits / T).log_softmax(-1)).sum(-1)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def soft_ce(x, onehot):\n"
                "    return -(onehot * torch.log(F.softmax(x))).sum(1).mean()\n"
            ),
            lines=(6,),
            fixed=None,
        ),
    )
    good = (
        # guarded: + eps, clamp_min, clamp(min=)
        "import torch\nimport torch.nn.functional as F\n"
        "def f(x, eps=1e-8):\n"
        "    a = torch.log(F.softmax(x, -1) + eps)\n"
        "    b = F.softmax(x, -1).clamp_min(1e-6).log()\n"
        "    return a + b + torch.log(torch.clamp(F.softmax(x, -1), min=eps))\n",
        # already stable; and logs that are not torch's
        "import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
        "def f(x, n):\n"
        "    return F.log_softmax(x, -1) + torch.log(F.log_softmax(x, -1).exp()) + math.log(n) + np.log(n)\n",
        # Lightning's self.log with arguments is logging, not a logarithm
        "import torch.nn.functional as F\n"
        "class M:\n"
        "    def training_step(self, x):\n"
        "        p = F.softmax(x, -1)\n"
        '        self.log("p", p)\n'
        "        return p\n",
        # a name assigned twice (guarded in between) is not followed
        "import torch\n"
        "def f(x):\n"
        "    p = torch.softmax(x, -1)\n"
        "    p = p + 1e-8\n"
        "    return torch.log(p)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        inp = self._log_input(node)
        if inp is None:
            return
        site = self._site(node, inp)
        if site is None:
            return
        uses = _uses(self.ctx, self.ctx.stack)
        if only_ranked(self.ctx, uses):
            return
        fix, note, use = None, "", "`log_softmax`"
        if site.source.given("dim"):
            fix = self._cross_entropy_fix(node, site)
            if fix is not None:
                use = "`cross_entropy` on the logits"
            else:
                fix, note = self._fix_for(site)
        self.report(node, fix, hazard=self._hazard(uses, site.source.input), use=use, note=note)

    def _hazard(self, uses: Set[str], logits: cst.BaseExpression) -> str:
        """The measured consequence for this use of the -inf: NaN in a product, Inf in a loss;
        the gradient is named only where one can flow to the logits."""
        no_gradient = gradient_free(self.ctx) or is_detached(self.ctx, logits)
        if "product" in uses:
            where = "the forward pass" if no_gradient else "the forward pass and the gradient"
            return f"is -inf once a probability underflows to 0, and 0 * -inf = NaN in {where}"
        if "loss" in uses:
            return "makes the loss Inf once a probability underflows to 0 (logit spread > ~104 in fp32, ~17 in fp16)"
        if no_gradient:
            return "is -inf once a probability underflows to 0 (then NaN in 0 * log 0)"
        return "is -inf once a probability underflows to 0 (then NaN in 0 * log 0 and in the gradient)"

    def _site(self, node: cst.Call, inp: cst.BaseExpression) -> Optional[_Site]:
        ctx = self.ctx
        core, wrap = strip_parens(inp), None
        if isinstance(core, cst.Subscript):
            subscript = core
            core, wrap = subscript.value, (lambda new: subscript.with_changes(value=new))
        else:
            # `probs.gather(1, a)`: log(gather(p)) == gather(log p) exactly
            gather = match_call(ctx.imports, core, "gather")
            if gather is not None and gather.fully_known:
                core, wrap = gather.input, (lambda new: with_input(gather, new))
        match = match_call(ctx.imports, _resolved(ctx, core), "softmax")
        if match is None:
            return None
        return _Site(node, match, _log_softmax_builder(match), core, _chain(ctx, core), wrap)

    def _cross_entropy_fix(self, node: cst.Call, site: _Site):
        """`F.nll_loss(torch.log(F.softmax(x, 1)), y, ...)` -> `F.cross_entropy(x, y, ...)`: the same
        loss exactly when the softmax is over dim 1 (the class dim of cross_entropy) with no other
        argument, and nll_loss's arguments are all visible (cross_entropy takes them all)."""
        stack = self.ctx.stack
        if site.wrap is not None or len(stack) < 3:
            return None
        arg, parent = stack[-2], stack[-3]
        if not isinstance(arg, cst.Arg) or arg.value is not node:
            return None
        nll = match_call(self.ctx.imports, parent, "nll_loss")
        if nll is None or nll.input is not node or not nll.fully_known:
            return None
        softmax = site.source
        dim = softmax.arg("dim")
        if set(softmax.args) != {"dim"} or not softmax.fully_known:
            return None
        if not isinstance(dim, cst.Integer) or number_value(dim) != 1:
            return None
        if site.chain:
            core = strip_parens(site.core)
            if self.ctx.only_read_here(core):
                return None  # the log-softmax assignment rewrite leaves no dead softmax behind
            if not self.ctx.unchanged_since([softmax.input, dim], site.chain):
                return None
        fix = self.fix()
        logits = strip_parens(softmax.input)
        args = [a.with_changes(value=logits) if a is arg else a for a in parent.args]
        fix.replace(parent, parent.with_changes(func=renamed_func(fix, nll, "cross_entropy"), args=args))
        return fix


# ---------------------------------------------------------------------------------------------
# TNL104


def _is_one(expr: cst.BaseExpression) -> bool:
    return isinstance(strip_parens(expr), (cst.Integer, cst.Float)) and number_value(strip_parens(expr)) == 1.0


def _logsigmoid_builder(match: CallMatch, negate: bool):
    def build(fix) -> Optional[cst.BaseExpression]:
        arg = negated(match.input) if negate else strip_parens(match.input)
        return cst.Call(func=fix.ref("torch.nn.functional.logsigmoid"), args=[cst.Arg(value=arg)])

    return build


class LogOfSigmoid(_LogRule):
    code = "TNL104"
    name = "log-of-sigmoid"
    message = "log of {what} is -inf once it rounds to 0{then}; use {use}{note}"
    rationale = (
        "`sigmoid(x)` rounds to exactly 1 from x >= 16.64 in float32 (8.32 in float16, 6.25 in "
        "bfloat16), so `log(1 - sigmoid(x))` is -inf there and its gradient NaN; `sigmoid(x)` "
        "itself underflows to 0 for very negative x, with the same result for `log(sigmoid(x))`. "
        "`F.logsigmoid(x)` computes `-softplus(-x)` directly and is finite everywhere, and "
        "`log(1 - sigmoid(x)) == log(sigmoid(-x)) == F.logsigmoid(-x)` exactly."
    )
    safety = Safety.SAFE
    needles = ("sigmoid", "expit")
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def log_not(z):\n"
                "    return torch.log(1 - torch.sigmoid(z))\n"
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def log_not(z):\n"
                "    return F.logsigmoid(-z)\n"
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def pair(a, b):\n"
                "    pos = (a * b).sum(-1).sigmoid().log()\n"
                "    neg = (1.0 - (a - b).sigmoid()).log()\n"
                "    return -(pos + neg).mean()\n"
            ),
            lines=(6, 7),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def pair(a, b):\n"
                "    pos = F.logsigmoid((a * b).sum(-1))\n"
                "    neg = F.logsigmoid(-(a - b))\n"
                "    return -(pos + neg).mean()\n"
            ),
        ),
        Example(
            bad=(
                "from torch import log, nn\n"
                "from torch.special import expit\n"
                "\n"
                "\n"
                "def gate(h, w):\n"
                "    g = expit(h @ w)\n"
                "    return h * log(g)\n"
            ),
            lines=(7,),
            fixed=(
                "from torch import log, nn\n"
                "from torch.special import expit\n"
                "\n"
                "\n"
                "def gate(h, w):\n"
                "    g = nn.functional.logsigmoid(h @ w)\n"
                "    return h * g\n"
            ),
        ),
    )
    good = (
        "import torch\n"
        "def f(x, eps=1e-6):\n"
        "    a = torch.log(torch.sigmoid(x) + eps)\n"
        "    b = torch.log(1 - torch.sigmoid(x) + eps)\n"
        "    c = torch.sigmoid(x).clamp_min(eps).log()\n"
        "    return a + b + c + torch.log((1 - torch.sigmoid(x)).clamp(min=1e-7))\n",
        "import math\nimport torch\nimport torch.nn.functional as F\n"
        "def f(x, n):\n"
        "    return F.logsigmoid(x) + F.logsigmoid(-x) + math.log(n) + torch.log(2 - torch.sigmoid(x))\n",
        "import torch\n"
        "def f(x):\n"
        "    s = torch.sigmoid(x)\n"
        "    s = s.clamp(1e-6, 1 - 1e-6)\n"
        "    return torch.log(s) + torch.log(1 - s)\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        site = None
        log1p = match_call(self.ctx.imports, node, "log1p")
        if log1p is not None:
            # torch.log1p(-sigmoid(x)) == log(1 - sigmoid(x))
            inner = strip_parens(log1p.input)
            if log1p.fully_known and isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Minus):
                site = self._sigmoid_site(node, inner.expression, negate=True, whole=log1p.input)
        else:
            inp = self._log_input(node)
            if inp is None:
                return
            site = self._site(node, inp)
        if site is None:
            return
        if only_ranked(self.ctx, _uses(self.ctx, self.ctx.stack)):
            return
        what = "`1 - sigmoid(x)`" if site.negate else "a sigmoid"
        use = "`F.logsigmoid(-x)`" if site.negate else "`F.logsigmoid(x)`"
        then = "" if gradient_free(self.ctx) else " (then NaN gradients)"
        fix, note = self._fix_for(site)
        self.report(node, fix, what=what, then=then, use=use, note=note)

    def _site(self, node: cst.Call, inp: cst.BaseExpression) -> Optional[_Site]:
        value = _resolved(self.ctx, inp)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract) and _is_one(value.left):
            return self._sigmoid_site(node, value.right, negate=True, whole=inp)
        return self._sigmoid_site(node, inp, negate=False, whole=inp)

    def _sigmoid_site(self, node, expr, negate: bool, whole) -> Optional[_Site]:
        """`whole` is what the log reads; `expr` the sigmoid part of it (the same unless negated)."""
        chain = _chain(self.ctx, whole)
        if negate and expr is not whole:
            chain = chain + _chain(self.ctx, expr)
        value = _resolved(self.ctx, expr)
        match = match_call(self.ctx.imports, value, "sigmoid")
        if match is None or not match.fully_known:
            return None
        return _Site(node, match, _logsigmoid_builder(match, negate), whole, chain, negate=negate)
