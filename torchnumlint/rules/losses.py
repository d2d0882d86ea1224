"""Loss-call sites, shared by every rule that asks about a loss's arguments.

What it answers:

- `loss_site(ctx, call, op, classes)`: `call` as a loss in function form (`F.binary_cross_entropy`,
  `F.cross_entropy`, `F.nll_loss` under any alias: `op`, an `calls.Op`) or through an `nn` loss
  module (`classes`: `nn.BCELoss`, `nn.CrossEntropyLoss`, `nn.NLLLoss`) called inline
  (`nn.BCELoss()(p, y)`), through a local or module-level name, or an attribute
  (`self.criterion = nn.BCELoss()` in `__init__`, called in `training_step`: `module_calls.module_call`).
  `LossSite.input` is the argument that holds the probabilities.
- `kl_site(ctx, call)`: is this call a KL divergence, and which argument is its input, its target,
  its `log_target`? `F.kl_div(...)` in any alias, or an `nn.KLDivLoss` instance called inline
  (`nn.KLDivLoss(...)(a, b)`), through a local or module-level name (`crit(a, b)`) or an
  attribute (`self.kl(a, b)`). The module form keeps its constructor: `log_target` is set there.
- `target_gradient(ctx, target, logits)`: whether a gradient reaches a target's logits (else a
  hazard that lives only in the target's gradient, TNL101's NaN, is never computed), and which
  caller passes it. Beyond the shared guards (no_grad, detach, data, a gradient-free function)
  it reads two kinds of evidence found in distillation and consistency losses: the author calls
  the source a teacher, or the logits are a parameter that the function's callers in the
  project (`rules/callers.py`) pass without a gradient; one caller that passes one is enough.

Why here: a loss's arguments are where probabilities meet log-probabilities; the rules on KL,
cross-entropy and BCE ask the same questions of the same call shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional, Tuple

import libcst as cst

from torchnumlint.rules.callers import Caller, callers
from torchnumlint.rules.evidence import lineage
from torchnumlint.rules.gradient_context import gradient_free, is_detached
from torchnumlint.rules.module_calls import module_call
from torchnumlint.rules.number_kinds import is_python_number
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.calls import CallMatch, is_literal, match_call, Op

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

KLDIV_LOSS = ("torch.nn.KLDivLoss", "torch.nn.modules.loss.KLDivLoss")


@dataclass
class LossSite:
    """One loss call: `input` is the argument of the probabilities; `match` the function form,
    `ctor` the `nn` loss constructor of the module form."""

    call: cst.Call
    input: cst.Arg
    match: Optional[CallMatch]
    ctor: Optional[cst.Call]

    @property
    def inline(self) -> bool:
        """Whether a fix may rewrite the whole call: every argument seen, and for the module form
        a constructor called on the spot (a constructor kept in a name may serve other calls)."""
        if any(a.star for a in self.call.args):
            return False
        if self.ctor is None:
            return self.match is not None and self.match.fully_known
        return self.call.func is self.ctor and not any(a.star for a in self.ctor.args)


def loss_site(ctx: "FileContext", call: cst.Call, op: Op, classes: Tuple[str, ...]) -> Optional[LossSite]:
    """`call` as the loss `op` in function form or an instance of one of `classes`, or None."""
    match = match_call(ctx.imports, call, op)
    if match is not None:
        arg = next(a for a in call.args if a.value is match.input)
        return LossSite(call, arg, match, None)
    ctor = module_call(ctx, call, *classes)
    if ctor is None:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    named = [a for a in call.args if a.keyword is not None and a.keyword.value == "input"]
    given = positional[0] if positional else named[0] if named else None
    return LossSite(call, given, None, ctor) if given is not None else None


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


def kl_site(ctx: "FileContext", call: cst.Call) -> Optional[KlSite]:
    """`call` as a KL divergence (`F.kl_div` or an `nn.KLDivLoss` instance), or None."""
    match = match_call(ctx.imports, call, "kl_div")
    if match is not None:
        if "target" not in match.args:
            return None
        arg0 = next(a for a in call.args if a.value is match.input)
        return KlSite(call, arg0, match.args["target"], match.args.get("log_target"), None, not match.fully_known)
    ctor = module_call(ctx, call, *KLDIV_LOSS)
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


# ---------------------------------------------------------------------------------------------
# Where a target's logits come from


def target_sources(ctx: "FileContext", expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
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


def from_teacher(ctx: "FileContext", expr: cst.BaseExpression, student: Optional[cst.BaseExpression] = None) -> bool:
    """The author calls the value's source a teacher (`teacher_logits`, `self.teacher(x)`,
    `out_teacher.logits`): a model this loss does not train. Its logits' NaN gradient, if any,
    never reaches the student's. A name is no proof of that: logits computed by the same model
    as the `student`'s (`teacher_logits = model(x)` beside `student_logits = model(prompt + x)`,
    prompt tuning's self-distillation) carry the gradient of the parameters they share."""
    for source in target_sources(ctx, expr):
        ident = source.value if isinstance(source, cst.Name) else source.attr.value if isinstance(source, cst.Attribute) else ""
        if "teacher" in ident.lower():
            return student is None or not same_model(ctx, expr, student)
    return False


def model_of(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[str]:
    """The code of the callee whose output `expr` is (`model`, `self.encoder`), through names,
    temperatures, attributes and indexing (`model(x).logits / T`); None when no call is met."""
    for source in target_sources(ctx, expr):
        if isinstance(source, cst.Call):
            qual = ctx.qualname(source.func)
            if qual is not None and qual.startswith("torch.") and source.args:
                return model_of(ctx, source.args[0].value)  # `F.log_softmax(model(x))`: the model's
            return ctx.module.code_for_node(strip_parens(source.func))
    return None


def same_model(ctx: "FileContext", a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Whether `a` and `b` are outputs of one callee (the same model called twice)."""
    first, second = model_of(ctx, a), model_of(ctx, b)
    return first is not None and first == second


def target_param(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[cst.Param]:
    """The parameter of the enclosing function that `expr` is (past names, a temperature and
    torch calls of it: `F.log_softmax(student_logits, -1)`)."""
    for source in target_sources(ctx, expr):
        if isinstance(source, cst.Call):
            qual = ctx.qualname(source.func)
            torch_call = qual is not None and qual.startswith("torch.") and bool(source.args)
            return target_param(ctx, source.args[0].value) if torch_call else None
        if isinstance(source, cst.Name):
            binding = ctx.binding(source)
            if binding is not None and isinstance(binding.node, cst.Param):
                return binding.node
        elif not isinstance(source, (cst.UnaryOperation, cst.BinaryOperation)):
            return None
    return None


def _no_gradient_here(ctx: "FileContext", value: cst.BaseExpression, student: Optional[cst.BaseExpression]) -> bool:
    return gradient_free(ctx) or is_detached(ctx, value) or from_teacher(ctx, value, student)


def target_gradient(
    ctx: "FileContext", target: cst.BaseExpression, logits: cst.BaseExpression, student: Optional[cst.BaseExpression] = None
) -> Optional[str]:
    """Whether a gradient reaches `logits`, from which the loss's `target` is computed: None when
    none does (the code runs without one, the target is detached, the logits are a teacher's and
    not the `student`'s own model under another name, or they are a parameter that the callers
    of the enclosing function pass without one: a parameter named like a teacher whose callers
    are seen is judged by what they pass). Else the evidence to name: "" for the code here, or
    a clause naming the call that passes logits with a gradient."""
    if gradient_free(ctx) or is_detached(ctx, target):
        return None
    param = target_param(ctx, logits)
    if param is not None:
        seen, caller = _caller_with_gradient(ctx, param, student)
        if caller is not None:
            return f" (`{param.name.value}` is passed with a gradient by the call at {caller.where})"
        if seen:
            return None
    return None if from_teacher(ctx, logits, student) else ""


def _caller_with_gradient(ctx: "FileContext", param: cst.Param, student: Optional[cst.BaseExpression]) -> Tuple[bool, Optional[Caller]]:
    """(whether a call of the enclosing function passing `param` is seen, the first that passes
    it with a gradient). The `student`'s parameter, where it is one, is read at each call too,
    so that a teacher by name is checked against the student's model there."""
    function = ctx.enclosing(cst.FunctionDef)
    if function is None:
        return False, None
    student_param = target_param(ctx, student) if student is not None else None
    seen = False
    for caller in callers(ctx):
        arg = caller.argument(function, param)
        if arg is None:
            continue  # the default, or arguments not seen
        seen = True
        other = caller.argument(function, student_param)
        with caller.ctx.visiting(caller.path + (arg, arg.value)):
            if not _no_gradient_here(caller.ctx, arg.value, other.value if other is not None else None):
                return True, caller
    return seen, None
