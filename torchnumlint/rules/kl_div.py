"""TNL1xx, KL divergence: `F.kl_div` / `nn.KLDivLoss` called with probabilities where PyTorch
expects log-probabilities, or a probability target whose zeros poison the gradient."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.guards import gradient_free, is_detached, is_python_number, module_call, softmax_call, strip_parens
from torchnumlint.rules.evidence import lineage
from torchnumlint.rules.log_domain import renamed_note
from torchnumlint.rules.names import is_literal, match_call
from torchnumlint.rules.rewrite import renamed_call, with_keyword
from torchnumlint.walk import Visitor

_KLDIV_LOSS = ("torch.nn.KLDivLoss", "torch.nn.modules.loss.KLDivLoss")


@dataclass
class KlSite:
    """One KL-divergence call, in function form or through an `nn.KLDivLoss` instance."""

    call: cst.Call
    input: cst.Arg
    target: cst.Arg
    log_target: Optional[cst.Arg]  # of the call, or of the constructor; positional or keyword
    ctor: Optional[cst.Call]  # the nn.KLDivLoss(...) constructor, for the module form
    opaque: bool  # *args / **kwargs: arguments we cannot see

    @property
    def log_target_false(self) -> bool:
        """`log_target` not passed, or passed as the literal False."""
        return self.log_target is None or is_literal(self.log_target.value, "False")

    @property
    def inline(self) -> bool:
        """Whether a fix can rewrite every argument: function form, or an inline constructor."""
        return not self.opaque and (self.ctor is None or self.call.func is self.ctor)


def kl_site(ctx, call: cst.Call) -> Optional[KlSite]:
    match = match_call(ctx.imports, call, "kl_div")
    if match is not None:
        if "target" not in match.args:
            return None
        arg0 = next(a for a in call.args if a.value is match.input)
        return KlSite(call, arg0, match.args["target"], match.args.get("log_target"), None, not match.fully_known)
    ctor = module_call(ctx, call, *_KLDIV_LOSS)
    if ctor is None:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    named = {a.keyword.value: a for a in call.args if a.keyword is not None}
    inp = positional[0] if positional else named.get("input")
    target = positional[1] if len(positional) > 1 else named.get("target")
    if inp is None or target is None:
        return None
    # KLDivLoss(size_average, reduce, reduction, log_target)
    ctor_positional = [a for a in ctor.args if a.keyword is None and not a.star]
    log_target = next((a for a in ctor.args if a.keyword is not None and a.keyword.value == "log_target"), None)
    if log_target is None and len(ctor_positional) > 3:
        log_target = ctor_positional[3]
    opaque = any(a.star for a in call.args) or any(a.star for a in ctor.args)
    return KlSite(call, inp, target, log_target, ctor, opaque)


def _to_log_softmax(ctx, fix, value: cst.BaseExpression) -> Tuple[Optional[cst.BaseExpression], Optional[str]]:
    """`value` (a softmax) rewritten to `log_softmax`, and the name now holding log-probabilities.
    Through a name, the assignment itself is rewritten, and only when nothing else reads the name
    (nested functions included); then `value` itself comes back. None when no rewrite is safe."""
    direct = match_call(ctx.imports, value, "softmax")
    if direct is not None:
        return renamed_call(fix, direct, "log_softmax"), None
    binding = ctx.binding(value)
    if binding is None or not binding.rewritable:
        return None, None
    match = match_call(ctx.imports, binding.value, "softmax")
    if match is None or not ctx.only_read_here(value):
        return None, None
    fix.replace(binding.value, renamed_call(fix, match, "log_softmax"))
    return value, value.value  # type: ignore[attr-defined]


def _with_log_target(call: cst.Call, given: Optional[cst.Arg]) -> cst.Call:
    """`call` with `log_target=True`: in the argument the user passed (positional or keyword),
    else as a new keyword."""
    if given is None:
        return with_keyword(call, "log_target", cst.Name("True"))
    return call.with_changes(args=[a.with_changes(value=cst.Name("True")) if a is given else a for a in call.args])


# ---------------------------------------------------------------------------------------------
# Where the target's logits come from. Evidence that no gradient reaches them, beyond the shared
# guards (no_grad, detach, data): a teacher, or a parameter every caller in the file passes
# without a gradient. (Both belong in guards once another rule asks.)


def _sources(ctx, expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """`expr` and what it is made from, down one line of descent: through names (to their single
    assignment), a temperature (`x / T`, `x * 0.5`, `-x`), attributes, calls (to the callee:
    `self.teacher(x)`, `out.float()`) and indexing (`out["logits"]`)."""

    def step(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            return node.value
        if isinstance(node, cst.Call):
            return node.func
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return node.expression
        if (
            isinstance(node, cst.BinaryOperation)
            and isinstance(node.operator, (cst.Divide, cst.Multiply))
            and (is_python_number(ctx, node.right) or isinstance(strip_parens(node.right), (cst.Name, cst.Attribute)))
        ):
            return node.left
        return None

    return lineage(ctx, expr, step, limit=12)


def _from_teacher(ctx, expr: cst.BaseExpression) -> bool:
    """The author calls the value's source a teacher (`teacher_logits`, `self.teacher(x)`,
    `out_teacher.logits`): a model this loss does not train. Its logits' NaN gradient, if any,
    never reaches the student's."""
    for source in _sources(ctx, expr):
        ident = source.value if isinstance(source, cst.Name) else source.attr.value if isinstance(source, cst.Attribute) else ""
        if "teacher" in ident.lower():
            return True
    return False


def _target_param(ctx, expr: cst.BaseExpression) -> Optional[cst.Param]:
    """The parameter of the enclosing function that `expr` is (past names and a temperature)."""
    for source in _sources(ctx, expr):
        if isinstance(source, cst.Name):
            binding = ctx.binding(source)
            if binding is not None and isinstance(binding.node, cst.Param):
                return binding.node
        elif not isinstance(source, (cst.UnaryOperation, cst.BinaryOperation)):
            return None
    return None


class _Calls(Visitor):
    """Every call in a module by what it calls, with its ancestors: a module-level function by
    its bare name (`f(...)`), a method by `self.f(...)` / `cls.f(...)` inside its own class (an
    unrelated `log.f(...)` is not a call of either). Calls from other files are not seen: a
    function they call with gradients is missed here."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.stack: List[cst.CSTNode] = []
        self.functions: Dict[str, List[Tuple[cst.CSTNode, ...]]] = {}
        self.methods: Dict[Tuple[int, str], List[Tuple[cst.CSTNode, ...]]] = {}
        self.walk(module)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name):
                self.functions.setdefault(func.value, []).append(tuple(self.stack))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
                cls = next((n for n in reversed(self.stack) if isinstance(n, cst.ClassDef)), None)
                if cls is not None:
                    self.methods.setdefault((id(cls), func.attr.value), []).append(tuple(self.stack))
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self.stack.pop()

    def of(self, function: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> List[Tuple[cst.CSTNode, ...]]:
        """The calls of `function` (a method of `cls`, or a module-level function when None)."""
        if cls is not None:
            return self.methods.get((id(cls), function.name.value), [])
        return self.functions.get(function.name.value, [])


def _argument(call: cst.Call, function: cst.FunctionDef, param: cst.Param) -> Optional[cst.Arg]:
    """The argument `call` passes for `param` of `function`; None when unknown (*args, **kwargs,
    not passed: the default)."""
    if any(a.star for a in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param.name.value:
            return arg
    ordered = list(function.params.posonly_params) + list(function.params.params)
    if param not in ordered:
        return None
    index = ordered.index(param)
    bound = isinstance(call.func, cst.Attribute) and ordered and ordered[0].name.value in ("self", "cls")
    index -= 1 if bound else 0
    positional = [a for a in call.args if a.keyword is None]
    return positional[index] if 0 <= index < len(positional) else None


class KlDivProbTarget(Rule):
    code = "TNL101"
    name = "kl-div-prob-target"
    message = (
        "`kl_div` target is a softmax that carries gradients: where it underflows to 0 the "
        "gradient of its logits is NaN; use `log_softmax` and `log_target=True`{note}"
    )
    rationale = (
        "`F.kl_div(input, target)` computes `target * (log(target) - input)` with `xlogy`, whose "
        "backward with respect to the target evaluates log(target). When the target is a softmax "
        "that still carries gradients (self-distillation, consistency or mutual-learning losses), "
        "any probability that underflows to exactly 0 makes the whole gradient row of its logits "
        "NaN, although the forward loss stays finite. With a vocabulary of 32000 this happens at a "
        "logit spread of 93.6 in float32, 83 in bfloat16 and only 7.0 in float16. Passing the "
        "target as `log_softmax` with `log_target=True` computes the same loss from "
        "log-probabilities, which never underflow to -inf at those spreads."
    )
    safety = Safety.SAFE
    needles = ("kl_div", "KLDivLoss")
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def distill_loss(s1, s2):\n"
                '    return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")\n'
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def distill_loss(s1, s2):\n"
                '    return F.kl_div(F.log_softmax(s1, dim=-1), F.log_softmax(s2, dim=-1), reduction="batchmean", log_target=True)\n'
            ),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch import nn\n"
                "\n"
                "\n"
                "def consistency(noisy, clean, T=2.0):\n"
                "    p = (clean / T).softmax(-1)\n"
                '    crit = nn.KLDivLoss(reduction="batchmean")\n'
                "    return crit(torch.log_softmax(noisy / T, -1), p) * T * T\n"
            ),
            lines=(8,),
            fixed=None,
        ),
        Example(
            bad=(
                "from torch import nn\n"
                "from torch.nn.functional import kl_div, log_softmax, softmax\n"
                "\n"
                "\n"
                "def mutual(a, b):\n"
                "    q = softmax(b, dim=1)\n"
                '    loss = kl_div(log_softmax(a, dim=1), q, reduction="batchmean")\n'
                '    loss2 = nn.KLDivLoss(reduction="batchmean")(log_softmax(b, dim=1), a.softmax(1))\n'
                "    return loss + loss2\n"
            ),
            lines=(7, 8),
            fixed=(
                "from torch import nn\n"
                "from torch.nn.functional import kl_div, log_softmax, softmax\n"
                "\n"
                "\n"
                "def mutual(a, b):\n"
                "    q = log_softmax(b, dim=1)\n"
                '    loss = kl_div(log_softmax(a, dim=1), q, reduction="batchmean", log_target=True)\n'
                '    loss2 = nn.KLDivLoss(reduction="batchmean", log_target=True)(log_softmax(b, dim=1), a.log_softmax(1))\n'
                "    return loss + loss2\n"
            ),
        ),
    )
    good = (
        # the target carries no gradient: detached, or computed under no_grad
        "import torch.nn.functional as F\n"
        "def kd(s, t):\n"
        '    return F.kl_div(F.log_softmax(s, -1), F.softmax(t, -1).detach(), reduction="batchmean")\n',
        "import torch\nimport torch.nn.functional as F\n"
        "def kd(s, x, teacher):\n"
        "    with torch.no_grad():\n"
        "        p = F.softmax(teacher(x), -1)\n"
        '    return F.kl_div(F.log_softmax(s, -1), p, reduction="batchmean")\n',
        "import torch.nn.functional as F\n"
        "def kd(s, t):\n"
        '    return F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), reduction="batchmean", log_target=True)\n',
    )

    _calls: Optional[_Calls] = None  # built for the file when a target is a parameter

    def visit_Call(self, node: cst.Call) -> None:
        site = kl_site(self.ctx, node)
        if site is None or not site.log_target_false:
            return
        target = site.target.value
        softmax = softmax_call(self.ctx, target)
        if softmax is None or self._no_gradient(target, softmax.input):
            return
        fix, renamed = None, None
        if site.inline:
            fix = self.fix()
            new_target, renamed = _to_log_softmax(self.ctx, fix, target)
            if new_target is None:
                fix = None
            else:
                args = [a.with_changes(value=new_target) if a is site.target else a for a in node.args]
                new = node.with_changes(args=args)
                if site.ctor is None:
                    new = _with_log_target(new, site.log_target)
                else:
                    new = new.with_changes(func=_with_log_target(site.ctor, site.log_target))
                fix.replace(node, new)
        self.report(target, fix, note=renamed_note(renamed))

    def _no_gradient(self, target: cst.BaseExpression, logits: cst.BaseExpression) -> bool:
        """No gradient reaches the target's logits, so the NaN of its underflow is never made."""
        ctx = self.ctx
        if gradient_free(ctx) or is_detached(ctx, target) or _from_teacher(ctx, logits):
            return True
        param = _target_param(ctx, logits)
        return param is not None and self._callers_pass_no_gradient(param)

    def _callers_pass_no_gradient(self, param: cst.Param) -> bool:
        """Every call of the enclosing function in this file (there is one at least) passes `param`
        a value without a gradient: detached, computed under no_grad, a teacher's."""
        ctx = self.ctx
        function = ctx.enclosing(cst.FunctionDef)
        if function is None:
            return False
        at = ctx.stack.index(function)
        cls = ctx.stack[at - 2] if at >= 2 and isinstance(ctx.stack[at - 2], cst.ClassDef) else None
        if self._calls is None:
            self._calls = _Calls(ctx.module)
        paths = self._calls.of(function, cls)
        if not paths:
            return False
        for path in paths:
            arg = _argument(path[-1], function, param)  # type: ignore[arg-type]
            if arg is None:
                return False
            with ctx.visiting(path + (arg, arg.value)):
                if not (gradient_free(ctx) or is_detached(ctx, arg.value) or _from_teacher(ctx, arg.value)):
                    return False
        return True


class KlDivProbInput(Rule):
    code = "TNL102"
    name = "kl-div-prob-input"
    message = "`kl_div` input must be log-probabilities, not a softmax: use `log_softmax`{note}"
    rationale = (
        "PyTorch's `kl_div(input, target)` expects `input` to hold log-probabilities (unlike the "
        "mathematical KL(P||Q) notation). Passing probabilities from `softmax` gives a loss and a "
        "gradient that are silently wrong: nothing NaNs, training just optimises the wrong "
        "objective. `log_softmax` computes the intended log-probabilities stably. The fix changes "
        "the loss value, so it is unsafe."
    )
    safety = Safety.UNSAFE
    needles = ("kl_div", "KLDivLoss")
    examples = (
        Example(
            bad=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def kl_loss(a, target):\n"
                '    return F.kl_div(F.softmax(a, dim=-1), target, reduction="batchmean")\n'
            ),
            lines=(6,),
            fixed=(
                "import torch\n"
                "import torch.nn.functional as F\n"
                "\n"
                "\n"
                "def kl_loss(a, target):\n"
                '    return F.kl_div(F.log_softmax(a, dim=-1), target, reduction="batchmean")\n'
            ),
        ),
    )
    good = (
        "import torch.nn.functional as F\n"
        "def kl_loss(a, target):\n"
        '    return F.kl_div(F.log_softmax(a, dim=-1), target, reduction="batchmean")\n',
    )

    def visit_Call(self, node: cst.Call) -> None:
        site = kl_site(self.ctx, node)
        if site is None or softmax_call(self.ctx, site.input.value) is None:
            return
        fix, renamed = None, None
        if not site.opaque:
            fix = self.fix()
            new_input, renamed = _to_log_softmax(self.ctx, fix, site.input.value)
            if new_input is None:
                fix = None
            elif new_input is not site.input.value:
                fix.replace(site.input.value, new_input)
        self.report(site.input.value, fix, note=renamed_note(renamed))
