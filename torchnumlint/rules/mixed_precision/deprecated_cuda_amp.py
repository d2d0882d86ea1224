"""TNL306 deprecated-cuda-amp: the `torch.cuda.amp` spellings that torch 2.13 warns about.

Rewrites `torch.cuda.amp.autocast/GradScaler/custom_fwd/custom_bwd` and `torch.cpu.amp.autocast`
(the list and each replacement: `autocast.DEPRECATED`) to their `torch.amp` spellings with the
device given (`"cpu"` for `torch.cpu.amp`: measured, it warns the same in 2.13 and both default
to bfloat16), keeping every argument, and drops a `from torch.cuda.amp import ...` (or
`torch.cpu.amp`) nothing reads any more. Code that
only old torch runs (the fallback of a version test, the `except` of a `try` using the new
spelling) and names bound two ways are left alone.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.rules.autocast import DEPRECATED, DEVICE_AUTOCAST_PARAMS, deprecated_device
from torchnumlint.rules.base import Example, Rule
from torchnumlint.rules.imports import dotted
from torchnumlint.rules.rewrite import as_keyword, keyword_arg
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FixBuilder

# The replacements that are decorators (used bare too: `@amp.custom_fwd`).
_CUSTOM = ("torch.amp.custom_fwd", "torch.amp.custom_bwd")

_CUDA = cst.SimpleString('"cuda"')
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _cuda_arg(comma: bool, device: str = "cuda") -> cst.Arg:
    """The positional `"cuda"` (or `"cpu"`) that the torch.amp spellings take first."""
    return cst.Arg(value=cst.SimpleString(f'"{device}"'), comma=_COMMA if comma else cst.MaybeSentinel.DEFAULT)


# The modules an import of a deprecated spelling comes from.
_AMP_MODULES = ("torch.cuda.amp", "torch.cuda", "torch.cpu.amp", "torch.cpu")
# The torch.amp spellings that replace torch.cuda.amp's: a `try` that uses one has an old-torch
# fallback in its `except`.
_NEW_AMP = re.compile(r"torch\.amp\.|torch\.autocast\b|torch\.GradScaler\b")
# A test of the torch version (or of a newer API's presence).
_VERSION_TEST = re.compile(r"version|TORCH_(GREATER|LESS|GE|LT|VERSION)|hasattr\(torch", re.IGNORECASE)


def _module_bindings(body: Sequence[cst.CSTNode]) -> Dict[str, set]:
    """Module-level name -> what binds it, through `if`/`try`/`with` blocks (not functions or
    classes): an import's qualified name, or "<local>" for a def, class or assignment."""
    found: Dict[str, set] = {}

    def bind(name: str, what: str) -> None:
        found.setdefault(name, set()).add(what)

    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        full = dotted(alias.name)
                        bind(
                            alias.asname.name.value if alias.asname else full.split(".")[0],  # type: ignore[union-attr]  # an import's `as` target is a Name
                            full if alias.asname else full.split(".")[0],
                        )
                elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    base = "." * len(small.relative) + (dotted(small.module) if small.module else "")
                    for alias in small.names:
                        bind(
                            alias.asname.name.value if alias.asname else dotted(alias.name),  # type: ignore[union-attr]  # an import's `as` target is a Name
                            f"{base}.{dotted(alias.name)}",
                        )
                elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = small.targets if isinstance(small, cst.Assign) else [small]
                    for target in targets:
                        if isinstance(target.target, cst.Name):
                            bind(target.target.value, "<local>")
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            bind(stmt.name.value, "<local>")
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            for block in _blocks(stmt):
                for name, whats in _module_bindings(block).items():
                    found.setdefault(name, set()).update(whats)
    return found


def _blocks(stmt: cst.CSTNode) -> List[Sequence[cst.CSTNode]]:
    """The statement lists of an `if` (with its elif/else), a `try` (handlers, else, finally), a `with`."""
    blocks: List[Sequence[cst.CSTNode]] = []
    pending: List[Optional[cst.CSTNode]] = [stmt]
    while pending:
        node = pending.pop()
        if node is None:
            continue
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock):
            blocks.append(body.body)
        pending.extend(getattr(node, "handlers", ()))
        pending.extend([getattr(node, "orelse", None), getattr(node, "finalbody", None)])
    return blocks


_WARNS = " (FutureWarning)"


class DeprecatedCudaAmp(Rule):
    code = "TNL306"
    name = "deprecated-cuda-amp"
    finds = "`torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)`, `custom_fwd/bwd`, `torch.cpu.amp.autocast(...)`"
    fix_summary = 'safe: `torch.amp.autocast("cuda", ...)`, and the `torch.cuda.amp` import once unused'
    message = "`{old}` is deprecated{why}: use `{new}`"
    rationale = (
        "`torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)` and "
        "`torch.cuda.amp.custom_fwd/custom_bwd` are deprecated in favour of the device-generic "
        "`torch.amp` API and emit a FutureWarning in torch 2.13; they will be removed. "
        '`torch.amp.autocast("cuda", ...)` and `torch.amp.GradScaler("cuda", ...)` behave the '
        "same (CUDA autocast still defaults to float16). The fix keeps every argument; positional "
        "arguments of `torch.cuda.amp.autocast` become keywords because the new signature puts "
        "`device_type` and `dtype` first."
    )
    safety = Safety.SAFE
    needles = ("cuda.amp", "cuda import amp", "cpu.amp", "cpu import amp")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._used: Optional[Dict[str, int]] = None
        self._bindings: Optional[Dict[str, set]] = None

    examples = (
        Example(
            bad=("import torch\n\n\ndef forward_fp16(x, w):\n    with torch.cuda.amp.autocast():\n        return x @ w\n"),
            lines=(5,),
            fixed=('import torch\n\n\ndef forward_fp16(x, w):\n    with torch.amp.autocast("cuda"):\n        return x @ w\n'),
        ),
        Example(
            bad=(
                "import torch\n"
                "from torch.cuda.amp import GradScaler, autocast\n"
                "\n"
                "scaler = GradScaler(init_scale=1024)\n"
                "\n"
                "\n"
                "def step(model, x, y, loss_fn, optimizer):\n"
                "    with autocast(dtype=torch.float16):\n"
                "        loss = loss_fn(model(x), y)\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
            ),
            lines=(4, 8),
            fixed=(
                "import torch\n"
                "\n"
                'scaler = torch.amp.GradScaler("cuda", init_scale=1024)\n'
                "\n"
                "\n"
                "def step(model, x, y, loss_fn, optimizer):\n"
                '    with torch.amp.autocast("cuda", dtype=torch.float16):\n'
                "        loss = loss_fn(model(x), y)\n"
                "    scaler.scale(loss).backward()\n"
                "    scaler.step(optimizer)\n"
                "    scaler.update()\n"
            ),
        ),
        Example(
            bad=(
                "from torch.cuda import amp\n"
                "from torch.autograd import Function\n"
                "\n"
                "\n"
                "class Square(Function):\n"
                "    @staticmethod\n"
                "    @amp.custom_fwd\n"
                "    def forward(ctx, x):\n"
                "        ctx.save_for_backward(x)\n"
                "        return x * x\n"
                "\n"
                "    @staticmethod\n"
                "    @amp.custom_bwd\n"
                "    def backward(ctx, g):\n"
                "        (x,) = ctx.saved_tensors\n"
                "        return 2 * x * g\n"
                "\n"
                "\n"
                "def run(x, use_amp):\n"
                "    with amp.autocast(use_amp):\n"
                "        return Square.apply(x)\n"
            ),
            lines=(7, 13, 20),
            fixed=(
                "from torch.autograd import Function\n"
                "import torch\n"
                "\n"
                "\n"
                "class Square(Function):\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_fwd(device_type="cuda")\n'
                "    def forward(ctx, x):\n"
                "        ctx.save_for_backward(x)\n"
                "        return x * x\n"
                "\n"
                "    @staticmethod\n"
                '    @torch.amp.custom_bwd(device_type="cuda")\n'
                "    def backward(ctx, g):\n"
                "        (x,) = ctx.saved_tensors\n"
                "        return 2 * x * g\n"
                "\n"
                "\n"
                "def run(x, use_amp):\n"
                '    with torch.amp.autocast("cuda", enabled=use_amp):\n'
                "        return Square.apply(x)\n"
            ),
        ),
    )
    good = (
        'import torch\ndef step(x, w):\n    with torch.amp.autocast("cuda"):\n        return x @ w\n',
        'import torch\nscaler = torch.amp.GradScaler("cuda")\n',
        'from torch.amp import autocast\ndef step(x, w):\n    with autocast("cuda", dtype=torch.float16):\n        return x @ w\n',
        # a project's own `amp` helper
        "import amp\ndef step(x, w):\n    with amp.autocast():\n        return x @ w  # torch.cuda.amp is not involved\n",
    )

    def visit_Call(self, node: cst.Call) -> None:
        qual = self.ctx.qualname(node.func) or ""
        new = DEPRECATED.get(qual)
        if new is None or self._ambiguous(node.func) or self._old_torch_branch():
            return
        if new == "torch.amp.autocast":
            self._autocast(node, deprecated_device(qual))
        elif new == "torch.amp.GradScaler":
            fix = self.fix()
            scaler = node.with_changes(func=fix.ref("torch.amp.GradScaler"), args=[_cuda_arg(bool(node.args))] + list(node.args))
            fix.replace(node, scaler)
            self.report(node, fix, old="torch.cuda.amp.GradScaler(...)", new='torch.amp.GradScaler("cuda", ...)', why=_WARNS)
        else:
            self._custom(node, node, new)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if isinstance(expr, (cst.Name, cst.Attribute)):
            new = DEPRECATED.get(self.ctx.qualname(expr) or "")
            if new in _CUSTOM and not self._ambiguous(expr) and not self._old_torch_branch():
                self._custom(expr, None, new)

    def _old_torch_branch(self) -> bool:
        """Whether the node is in a branch of a torch-version test (`torch.amp.GradScaler(...) if
        TORCH_GE_2_4 else torch.cuda.amp.GradScaler()`, `if version.parse(torch.__version__) <
        version.parse("2.4"): ...`) or in the `except` of a `try` that uses the new spelling: the
        author already chose per version, and the code that keeps `torch.cuda.amp` is what only
        old torch runs, where the `torch.amp` spelling does not exist, so it is neither
        deprecated there nor rewritable."""
        stack = self.ctx.stack
        code = self.ctx.module.code_for_node
        return any(
            (
                isinstance(node, (cst.If, cst.IfExp))
                and (inner is node.orelse or inner is node.body)
                and _VERSION_TEST.search(code(node.test)) is not None
            )
            or (
                # `try: torch.amp.GradScaler(...)` / `except AttributeError: torch.cuda.amp...`
                isinstance(node, cst.Try) and isinstance(inner, cst.ExceptHandler) and _NEW_AMP.search(code(node.body)) is not None
            )
            for node, inner in zip(stack, stack[1:])
        )

    def _ambiguous(self, expr: cst.BaseExpression) -> bool:
        """Whether the name `expr` starts with is bound at module level in more than one way
        (`try: from torch.cuda.amp import autocast` / `except ImportError: from torch.amp import
        autocast`, or per torch version): which binding runs is not known here, and rewriting
        the call for one breaks the other, so such a name is not reported."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        if self._bindings is None:
            self._bindings = _module_bindings(self.ctx.module.body)
        return isinstance(expr, cst.Name) and len(self._bindings.get(expr.value, ())) > 1

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """`from torch.cuda.amp import autocast` (or `from torch.cuda import amp`) that nothing
        uses any more, typically once the calls were rewritten: the import goes too, so a fixed
        file does not trip an unused-import check."""
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted(node.module)
        if module not in _AMP_MODULES or self._may_be_needed_elsewhere():
            return
        used = self._names_used()
        unused = [
            alias
            for alias in node.names
            if (module in ("torch.cuda", "torch.cpu") and dotted(alias.name) == "amp") or module.endswith(".amp")
            if not used.get((alias.asname.name if alias.asname else alias.name).value, 0)  # type: ignore[union-attr, arg-type]  # a from-import's names and `as` targets are Names
        ]
        if not unused:
            return
        builder = self.fix()
        fix: Optional[FixBuilder] = builder
        kept = [alias for alias in node.names if alias not in unused]
        line = self.ctx.parent if isinstance(self.ctx.parent, cst.SimpleStatementLine) else None
        block = self.ctx.stack[-3] if len(self.ctx.stack) > 2 else None
        if kept:
            builder.replace(node, node.with_changes(names=[*kept[:-1], kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]))
        elif (
            line is not None
            and len(line.body) == 1
            and isinstance(block, cst.IndentedBlock)
            and all(
                isinstance(s, cst.SimpleStatementLine) and all(isinstance(i, (cst.Import, cst.ImportFrom)) for i in s.body)
                for s in block.body
            )
        ):
            builder.replace(node, cst.Pass())  # removing every import of `if x:` would leave it empty
        elif line is not None and len(line.body) == 1:
            builder.remove_line(line)
        else:
            fix = None
        names = ", ".join(dotted(alias.name) for alias in unused)
        self.report(node, fix, old=f"from {module} import {names}", new="torch.amp", why=" (and unused here)")

    def _may_be_needed_elsewhere(self) -> bool:
        """An import that other code may read even where this file does not: a package's
        `__init__.py` or a name in `__all__` (a re-export), a class body (an attribute), a `try`
        body (an availability probe: removing it changes what the `try` tests)."""
        if os.path.basename(self.ctx.path) == "__init__.py" or self.ctx.mentions("__all__"):
            return True
        return any(isinstance(node, (cst.ClassDef, cst.Try)) for node in self.ctx.stack)

    def _names_used(self) -> Dict[str, int]:
        """How often each name is read in the file, imports left out (once per file)."""
        if self._used is None:
            counts: Dict[str, int] = {}

            class _Count(Visitor):
                def visit_Import(self, node) -> bool:
                    return False

                visit_ImportFrom = visit_Import

                def visit_Attribute(self, node: cst.Attribute) -> bool:
                    self.walk(node.value)  # `torch.amp.autocast` does not read a name `autocast`
                    return False

                def visit_Arg(self, node: cst.Arg) -> bool:
                    self.walk(node.value)  # nor does a keyword `autocast=...`
                    return False

                def visit_Name(self, node: cst.Name) -> None:
                    counts[node.value] = counts.get(node.value, 0) + 1

            _Count().walk(self.ctx.module)
            self._used = counts
        return self._used

    def _custom(self, node: cst.BaseExpression, call: Optional[cst.Call], new: str) -> None:
        """`torch.cuda.amp.custom_fwd/custom_bwd`, called or bare, as `new` with `device_type="cuda"`."""
        short = new.rsplit(".", 1)[1]
        builder = self.fix()
        fix: Optional[FixBuilder] = builder
        func = builder.ref(new)
        args = list(call.args) if call is not None else []
        if any(a.star == "**" for a in args):
            fix = None
        else:
            positional = [a for a in args if a.keyword is None and not a.star]
            rest = [a for a in args if a.keyword is not None or a.star]
            device = keyword_arg("device_type", _CUDA, comma=bool(rest))
            if positional:
                positional[-1] = positional[-1].with_changes(comma=_COMMA)
            built = cst.Call(func=func, args=positional + [device] + rest)
            if call is not None:
                built = call.with_changes(func=func, args=built.args)
            builder.replace(node, built)
        self.report(node, fix, old=f"torch.cuda.amp.{short}", new=f'torch.amp.{short}(device_type="cuda", ...)', why=_WARNS)

    def _autocast(self, node: cst.Call, device: str) -> None:
        fix: Optional[FixBuilder] = self.fix()
        args: List[cst.Arg] = []
        positional = 0
        for arg in node.args:
            if arg.star == "*":
                fix = None
                break
            if arg.keyword is None and not arg.star:
                if positional >= len(DEVICE_AUTOCAST_PARAMS):
                    fix = None
                    break
                arg = as_keyword(arg, DEVICE_AUTOCAST_PARAMS[positional])
                positional += 1
            args.append(arg)
        if fix is not None:
            new = node.with_changes(func=fix.ref("torch.amp.autocast"), args=[_cuda_arg(bool(args), device)] + args)
            fix.replace(node, new)
        self.report(node, fix, old=f"torch.{device}.amp.autocast(...)", new=f'torch.amp.autocast("{device}", ...)', why=_WARNS)
