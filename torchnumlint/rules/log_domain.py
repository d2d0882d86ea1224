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
from typing import Callable, Dict, List, Optional, Set

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.guards import number_value, strip_parens
from torchnumlint.rules.names import Binding, CallMatch, ScopeTable, make_op, match_call
from torchnumlint.rules.rewrite import renamed_call, renamed_func

# `probs.gather(1, a)` / `torch.gather(probs, 1, a)`: log(gather(p)) == gather(log p) exactly.
_GATHER = make_op("gather", {"torch.gather"}, "gather", ("dim", "index", "sparse_grad"))

_MAX_CHAIN = 4  # names followed: `q = p`, `p = F.softmax(x, -1)`


# ---------------------------------------------------------------------------------------------
# Shared helpers (candidates for guards.py / rewrite.py)


def follow_names(ctx, expr: cst.BaseExpression) -> List[Binding]:
    """The chain of single assignments behind a plain name (`q = p`, `p = ...`), nearest first.

    Only `cst.Name`s are followed (not `self.attr`, whose assignment lives in another method and
    can be changed in place where we cannot see it)."""
    chain: List[Binding] = []
    expr = strip_parens(expr)
    while isinstance(expr, cst.Name) and len(chain) < _MAX_CHAIN:
        binding = ctx.binding(expr)
        if binding is None or binding.value is None:
            break
        chain.append(binding)
        expr = strip_parens(binding.value)
    return chain


def resolved(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` with plain names followed to their single assignment, parentheses stripped."""
    chain = follow_names(ctx, expr)
    return strip_parens(chain[-1].value) if chain else strip_parens(expr)  # type: ignore[arg-type]


def is_plain(expr: cst.BaseExpression) -> bool:
    """Recomputing `expr` gives the same value: names, attributes, literals, arithmetic, indexing;
    no calls, no comprehensions, no walrus."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis)):
        return True
    if isinstance(expr, cst.Attribute):
        return is_plain(expr.value)
    if isinstance(expr, cst.UnaryOperation):
        return is_plain(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return is_plain(expr.left) and is_plain(expr.right)
    if isinstance(expr, cst.Tuple):
        return all(isinstance(e, cst.Element) and is_plain(e.value) for e in expr.elements)
    if isinstance(expr, cst.Subscript):
        if not is_plain(expr.value):
            return False
        for element in expr.slice:
            inner = element.slice
            if isinstance(inner, cst.Index):
                if not is_plain(inner.value):
                    return False
            else:  # cst.Slice
                parts = (inner.lower, inner.upper, inner.step)
                if not all(p is None or is_plain(p) for p in parts):
                    return False
        return True
    return False


def _read_names(expr: cst.CSTNode) -> Set[str]:
    """Names read by `expr`, plus `a.b` for attributes of a name (how ScopeTable records
    `self.x = ...`)."""
    found: Set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if isinstance(node.value, cst.Name):
                found.add(f"{node.value.value}.{node.attr.value}")
            node.value.visit(self)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

    expr.visit(_Collect())
    return found


class ScopeCache:
    """Scope tables for stability questions, built once per scope of a file."""

    def __init__(self) -> None:
        self._tables: Dict[int, ScopeTable] = {}

    def table(self, ctx) -> ScopeTable:
        scope = ctx.enclosing(cst.FunctionDef)
        if scope is None:
            scope = ctx.module
        table = self._tables.get(id(scope))
        if table is None:
            table = self._tables[id(scope)] = ScopeTable(ctx.imports, scope)
        return table

    def unchanged_since(
        self, ctx, anchor: cst.CSTNode, parts: List[cst.BaseExpression], chain: List[Binding]
    ) -> bool:
        """Whether every expression in `parts` (found inside `anchor`, reached from the node being
        visited through the assignments `chain`) can be recomputed there with the same value:
        plain, no name they read is bound again (or changed in place) anywhere after `anchor` in
        the scope, and inside a loop the assignment runs in the same iteration as the use."""
        if not all(is_plain(strip_parens(p)) for p in parts):
            return False
        if not same_iteration(ctx, chain):
            return False
        table = self.table(ctx)
        start = table.order.get(id(anchor))
        if start is None:
            return False
        for part in parts:
            for name in _read_names(part):
                if any(b.order > start for b in table.bindings.get(name, ())):
                    return False
        return True


def only_read_here(ctx, name: cst.Name) -> bool:
    """Whether the local `name` is read nowhere but at the node being visited, so its assignment
    may be rewritten: a function's local (a module global can be imported elsewhere), read once
    in the function's own table, and not read by a nested function, lambda or class (which
    `ctx.name_loads` does not count)."""
    scope = ctx.enclosing(cst.FunctionDef)
    if scope is None or ctx.name_loads(name) != 1:
        return False
    found: List[cst.Name] = []

    class _Nested(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0

        def visit_FunctionDef(self, node) -> None:
            self.depth += 1

        def leave_FunctionDef(self, node) -> None:
            self.depth -= 1

        visit_Lambda = visit_ClassDef = visit_FunctionDef
        leave_Lambda = leave_ClassDef = leave_FunctionDef

        def visit_Name(self, node: cst.Name) -> None:
            if self.depth and node.value == name.value:
                found.append(node)

    scope.body.visit(_Nested())
    return not found


def same_iteration(ctx, chain: List[Binding]) -> bool:
    """Outside loops, True. Inside one, whether the single assignment in `chain` is a statement of
    a block (inside the innermost loop) that also holds the node being visited, so it ran in the
    same iteration, unconditionally, before it. A conditional or outer assignment can hold a value
    from another iteration."""
    stack = ctx.stack
    loop_at = None
    for i in range(len(stack) - 1, -1, -1):
        if isinstance(stack[i], (cst.FunctionDef, cst.Module, cst.Lambda, cst.ClassDef)):
            break
        if isinstance(stack[i], (cst.For, cst.While)):
            loop_at = i
            break
    if loop_at is None:
        return True
    if len(chain) != 1:
        return False
    assign = chain[0].node
    for block in stack[loop_at + 1 :]:
        if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            for stmt in block.body:
                if isinstance(stmt, cst.SimpleStatementLine) and any(small is assign for small in stmt.body):
                    return True
    return False


def negated(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`-expr`, parenthesised unless `expr` is an atom (`-x`, `-f(x)`, `-(a + b)`, `-(x ** 2)`)."""
    expr = strip_parens(expr)
    atoms = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)
    if not isinstance(expr, atoms):
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.UnaryOperation(operator=cst.Minus(), expression=expr)


def with_input(match: CallMatch, new: cst.BaseExpression) -> cst.Call:
    """`match`'s call with its tensor input replaced (receiver for the method form)."""
    call = match.call
    if match.form == "method":
        return call.with_changes(func=call.func.with_changes(value=new))  # type: ignore[union-attr]
    return call.with_changes(args=[a.with_changes(value=new) if a.value is match.input else a for a in call.args])


def _explicit(value: Optional[cst.BaseExpression]) -> bool:
    return value is not None and not (isinstance(value, cst.Name) and value.value == "None")


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

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes = ScopeCache()

    def _log_input(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        match = match_call(self.ctx.imports, node, "log")
        if match is None or not match.fully_known:
            return None
        # No `is_guarded` test: an input that is exactly a softmax / sigmoid (or a name whose one
        # assignment is) is unguarded by construction, and `+ eps`, `clamp_min`, `clamp(min=)`,
        # `torch.maximum`, `where` or a second assignment are never that shape. (`is_guarded`
        # would also call `softmax(s.masked_fill(m, finfo.min))` guarded, which is the hazard.)
        return match.input

    def _core_fix(self, fix, site: _Site) -> Optional[cst.BaseExpression]:
        """The replacement for `site.core` in log space, adding edits to `fix`; None: no fix."""
        if not site.chain:
            return site.build(fix)
        name = strip_parens(site.core)
        first = site.chain[0]
        if (
            isinstance(name, cst.Name)
            and len(site.chain) == 1
            and isinstance(first.node, cst.Assign)
            and len(first.node.targets) == 1
            and only_read_here(self.ctx, name)
        ):
            new = site.build(fix)
            if new is None:
                return None
            fix.replace(first.value, new)
            return name
        parts = [site.source.input] + [a.value for a in site.source.args.values()]
        if not self._scopes.unchanged_since(self.ctx, site.source.call, parts, site.chain):
            return None
        return site.build(fix)

    def _fix_for(self, site: _Site):
        fix = self.fix()
        core = self._core_fix(fix, site)
        if core is None:
            return None
        new = site.wrap(core) if site.wrap is not None else core
        fix.replace(site.log, strip_parens(new))
        return fix


# ---------------------------------------------------------------------------------------------
# TNL103


def _log_softmax_builder(match: CallMatch):
    def build(fix) -> Optional[cst.BaseExpression]:
        return strip_parens(renamed_call(fix, match, "log_softmax"))

    return build


class LogOfSoftmax(_LogRule):
    code = "TNL103"
    name = "log-of-softmax"
    message = (
        "log of a softmax is -inf once a probability underflows to 0 (then NaN in 0 * log 0 and in "
        "the gradient); use {use}"
    )
    rationale = (
        "`softmax` rounds probabilities below the smallest subnormal to exactly 0, and the log of "
        "those is -inf: a loss built from it is inf, `0 * log 0` (one-hot targets, entropy) is NaN in "
        "the forward pass, and the gradient is NaN either way. This happens at a logit spread of "
        "about 120 in float32 and only 20 in float16, spreads that saturated or diverging models "
        "reach. `log_softmax` computes `x - logsumexp(x)` directly and stays finite at any spread; "
        "`F.nll_loss(torch.log(F.softmax(x, 1)), y)` is exactly `F.cross_entropy(x, y)`. The fix "
        "keeps the dim and dtype the user passed; a softmax without an explicit dim (deprecated, "
        "its dim is guessed) is reported without a fix."
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
        fix = None
        use = "`log_softmax`"
        if _explicit(site.source.arg("dim")):
            fix = self._cross_entropy_fix(node, site)
            if fix is not None:
                use = "`cross_entropy` on the logits"
            else:
                fix = self._fix_for(site)
        self.report(node, fix, use=use)

    def _site(self, node: cst.Call, inp: cst.BaseExpression) -> Optional[_Site]:
        ctx = self.ctx
        core, wrap = strip_parens(inp), None
        if isinstance(core, cst.Subscript):
            subscript = core
            core, wrap = subscript.value, (lambda new: subscript.with_changes(value=new))
        else:
            gather = match_call(ctx.imports, core, _GATHER)
            if gather is not None and gather.fully_known:
                core, wrap = gather.input, (lambda new: with_input(gather, new))
        chain = follow_names(ctx, core)
        value = strip_parens(chain[-1].value) if chain else strip_parens(core)  # type: ignore[arg-type]
        match = match_call(ctx.imports, value, "softmax")
        if match is None:
            return None
        return _Site(node, match, _log_softmax_builder(match), core, chain, wrap)

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
            if isinstance(core, cst.Name) and only_read_here(self.ctx, core):
                return None  # the log-softmax assignment rewrite leaves no dead softmax behind
            if not self._scopes.unchanged_since(self.ctx, softmax.call, [softmax.input, dim], site.chain):
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
    message = "log of {what} is -inf once it rounds to 0 (then NaN gradients); use {use}"
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
        what = "`1 - sigmoid(x)`" if site.negate else "a sigmoid"
        use = "`F.logsigmoid(-x)`" if site.negate else "`F.logsigmoid(x)`"
        self.report(node, self._fix_for(site), what=what, use=use)

    def _site(self, node: cst.Call, inp: cst.BaseExpression) -> Optional[_Site]:
        value = resolved(self.ctx, inp)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract) and _is_one(value.left):
            return self._sigmoid_site(node, value.right, negate=True, whole=inp)
        return self._sigmoid_site(node, inp, negate=False, whole=inp)

    def _sigmoid_site(self, node, expr, negate: bool, whole) -> Optional[_Site]:
        """`whole` is what the log reads; `expr` the sigmoid part of it (the same unless negated)."""
        chain = follow_names(self.ctx, whole)
        if negate and expr is not whole:
            chain = chain + follow_names(self.ctx, expr)
        value = resolved(self.ctx, expr)
        match = match_call(self.ctx.imports, value, "sigmoid")
        if match is None or not match.fully_known:
            return None
        return _Site(node, match, _logsigmoid_builder(match, negate), whole, chain, negate=negate)
