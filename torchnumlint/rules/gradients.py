"""Where a gradient can flow, and where none can.

Rules whose claim is about a gradient (a NaN or infinite gradient at 0, a NaN gradient through a
KL target) report only where a gradient can flow. Lexically that is decided by `with
torch.no_grad()` and the decorators (`FileContext.in_no_grad`); this module adds the code that
runs without gradients by convention or by construction:

- methods that training frameworks call under `no_grad` (Lightning's `validation_step`,
  `test_step`, `predict_step`), evaluation and generation entry points (`evaluate`, `generate`,
  a pipeline's `__call__`);
- data code: every method of a `Dataset` subclass, collate and preprocessing functions;
- a decomposition of an op (`@register_decomposition(aten.silu)`: torch's `_decomp`, inductor's):
  it runs below autograd, on a graph whose gradient autograd has already taken from the op's own
  derivative formula;
- a function of this file whose every call site in the file is itself gradient-free (a helper of
  an `evaluate`), followed to a fixpoint; a function referenced any other way (a callback, an
  export) is not.

The other way round, a claim about a gradient is made by default only where the code shows one
(`runs_with_grad`): a module's `forward`, a loss, a training step, a function that calls
`.backward()`, and the functions of the file they call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Set

import libcst as cst

from torchnumlint.rules.bindings import is_no_grad_function, is_no_grad_item
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# Called by frameworks under no_grad / inference_mode, or by convention inference-only.
_NO_GRAD_FUNCTION_NAMES = frozenset(
    {
        "validation_step",
        "test_step",
        "predict_step",
        "on_validation_batch_end",
        "on_test_batch_end",
        "evaluate",
        "evaluation",
        "eval_step",
        "evaluation_step",
        "validate",
        "validation",
        "generate",
        "inference",
        "infer",
        "predict",
    }
)
_DATA_FUNCTION_WORDS = ("collate", "preprocess")
_PIPELINE_WORD = "Pipeline"
_DATASET_WORD = "Dataset"


# A class whose own or base names say it can hold parameters (an nn.Module, by name where the base
# is another project class); any other class's attributes are plain state.
MODULE_WORDS = (
    "Module",
    "Layer",
    "Model",
    "Net",
    "Block",
    "Encoder",
    "Decoder",
    "Head",
    "Loss",
    "Attention",
    "Embedding",
    "Function",
    "Cell",
    "Sequential",
    "Wrapper",
)


def is_module_class(cls: cst.ClassDef) -> bool:
    return any(word in base for base in base_names(cls) for word in MODULE_WORDS)


def base_names(cls: cst.ClassDef) -> List[str]:
    names = []
    for base in cls.bases:
        value = base.value
        if isinstance(value, cst.Attribute):
            names.append(value.attr.value)
        elif isinstance(value, cst.Name):
            names.append(value.value)
    return names


_BELOW_AUTOGRAD_DECORATORS = frozenset({"register_decomposition"})


# Calls that take a gradient, whatever their arguments are called (a gradient penalty, a
# meta-learning step): the function that makes them trains like one that calls `.backward()`.
_DIFFERENTIATING = frozenset(
    {
        "torch.autograd.grad",
        "torch.autograd.backward",
        "torch.autograd.functional.jacobian",
        "torch.autograd.functional.vjp",
        "torch.autograd.functional.hessian",
    }
)


def _below_autograd(func: cst.FunctionDef) -> bool:
    """Registered as a decomposition of an op (`@register_decomposition(...)`, any spelling)."""
    for deco in func.decorators:
        target = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
        if isinstance(target, cst.Attribute):
            target = target.attr
        if isinstance(target, cst.Name) and target.value in _BELOW_AUTOGRAD_DECORATORS:
            return True
    return False


def _by_convention(func: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> bool:
    """Gradient-free by its name, its class or its registration: see the module docstring."""
    if _below_autograd(func):
        return True
    name = func.name.value
    if name in _NO_GRAD_FUNCTION_NAMES or any(word in name.lower() for word in _DATA_FUNCTION_WORDS):
        return True
    if cls is None:
        return False
    bases = base_names(cls)
    if any(_DATASET_WORD in base for base in bases):
        return True
    if name == "__call__" and (_PIPELINE_WORD in cls.name.value or any(_PIPELINE_WORD in b for b in bases)):
        return True
    return False


class _FunctionFacts(Visitor):
    """One walk of a module: for each function, whether it is gradient-free in itself, and the
    functions (or lexically no-grad blocks) that call it by name (`f(...)`, `self.f(...)`)."""

    def __init__(self, ctx: "FileContext") -> None:
        super().__init__()
        self.ctx = ctx
        self.own: Dict[str, bool] = {}  # function name -> gradient-free by itself
        self.defined: Dict[str, int] = {}  # name -> how many definitions
        # callee -> the functions that call it (None: a no-grad block; "<module>": module level)
        self.callers: Dict[str, List[Optional[str]]] = {}
        self.training: Set[str] = set()  # functions that differentiate: see `_trains`
        self._functions: List[cst.FunctionDef] = []
        self._classes: List[Optional[cst.ClassDef]] = [None]
        self._no_grad = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        outer_free = bool(self._functions) and self.own.get(self._functions[-1].name.value, False)
        free = outer_free or is_no_grad_function(self.ctx.imports, node) or _by_convention(node, self._classes[-1])
        if not free and _trains(node, self._classes[-1]):
            self.training.add(name)
        self.own[name] = self.own.get(name, True) and free  # a name defined twice: both must be
        self.defined[name] = self.defined.get(name, 0) + 1
        self._functions.append(node)
        self._classes.append(None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.pop()
        self._classes.pop()

    def visit_With(self, node: cst.With) -> None:
        if any(is_no_grad_item(self.ctx.imports, item.item) for item in node.items):
            self._no_grad += 1

    def leave_With(self, node: cst.With) -> None:
        if any(is_no_grad_item(self.ctx.imports, item.item) for item in node.items):
            self._no_grad -= 1

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        callee = None
        if isinstance(func, cst.Name):
            callee = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
            callee = func.attr.value
        differentiates = (isinstance(func, cst.Attribute) and func.attr.value == "backward") or (
            self.ctx.imports.qualname(func) in _DIFFERENTIATING  # `torch.autograd.grad(outputs=..., inputs=...)`
        )
        if differentiates and self._functions and not self._no_grad:
            self.training.add(self._functions[-1].name.value)
        if callee is not None:
            if self._no_grad:
                caller = None
            elif self._functions:
                caller = self._functions[-1].name.value
            else:
                caller = "<module>"  # module-level code (`if __name__ == "__main__": train()`) trains
            self.callers.setdefault(callee, []).append(caller)

    def free_functions(self) -> Set[str]:
        """Names of the functions that run only without gradients (a fixpoint over callers)."""
        free = {name for name, own in self.own.items() if own}
        changed = True
        while changed:
            changed = False
            for name in self.defined:
                if name in free or self.defined[name] != 1:
                    continue
                sites = self.callers.get(name)
                # every mention of the name is a call from a gradient-free place
                if sites and len(sites) >= self._counts.get(name, 0) and all(c is None or c in free for c in sites):
                    free.add(name)
                    changed = True
        return free

    def training_functions(self, free: Set[str]) -> Set[str]:
        """Names of the functions that run with gradients: the seeds of `_trains`, functions
        that call `.backward()`, and what they call (a fixpoint), less the gradient-free ones
        (`free`, from `free_functions`)."""
        found = set(self.training) - free
        changed = True
        while changed:
            changed = False
            for name in self.defined:
                if name not in found and name not in free and any(c in found for c in self.callers.get(name, ())):
                    found.add(name)
                    changed = True
        return found

    def walk_module(self, module: cst.Module) -> "_FunctionFacts":
        self._counts: Dict[str, int] = {}
        counts = self._counts

        class _Count(Visitor):
            def visit_Name(self, node: cst.Name) -> None:
                counts[node.value] = counts.get(node.value, 0) + 1

            def visit_Attribute(self, node: cst.Attribute) -> bool:
                counts[node.attr.value] = counts.get(node.attr.value, 0) + 1
                self.walk(node.value)  # not `attr`: it is a Name too, and counted once here
                return False

            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                counts[node.name.value] = counts.get(node.name.value, 0) - 1  # its own name

        _Count().walk(module)
        self.walk(module)
        return self


_LOSS_WORDS = ("loss", "criterion")
_TRAINING_METHODS = frozenset({"training_step", "train_step", "compute_loss"})


def _trains(func: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> bool:
    """Differentiated by design: a module's `forward`, a loss (a function named for one, any
    method of a class named for one), a training step."""
    name = func.name.value
    if name in _TRAINING_METHODS or any(word in name.lower() for word in _LOSS_WORDS):
        return True
    if cls is None:
        return False
    names = [cls.name.value, *base_names(cls)]
    if any(word in n for n in names for word in ("Loss", "Criterion")):
        return True
    return name == "forward" and any(word in n for n in names for word in MODULE_WORDS)


class _Facts:
    def __init__(self, ctx: "FileContext") -> None:
        walked = _FunctionFacts(ctx).walk_module(ctx.module)
        self.free = walked.free_functions()
        self.training = walked.training_functions(self.free)


def _facts(ctx: "FileContext") -> _Facts:
    return ctx.per_file("gradient facts", _Facts)


def _functions_around(ctx: "FileContext") -> List[cst.FunctionDef]:
    return [node for node in ctx.stack[:-1] if isinstance(node, cst.FunctionDef)]


def runs_without_grad(ctx: "FileContext") -> bool:
    """Whether the node being visited runs only without autograd: under `no_grad` (lexically or
    by a decorator), or in a function that does by convention or is called only from such code."""
    if ctx.in_no_grad():
        return True
    free = _facts(ctx).free
    return any(func.name.value in free for func in _functions_around(ctx))


def runs_with_grad(ctx: "FileContext") -> bool:
    """Whether the code shows that the node being visited is differentiated: it is in a
    module's `forward`, a loss, a training step, a function that calls `.backward()`, or a
    function of this file that one of those calls; and not in gradient-free code."""
    if runs_without_grad(ctx):
        return False
    functions = _functions_around(ctx)
    return bool(functions) and functions[-1].name.value in _facts(ctx).training
