"""The project pre-pass: facts that cross file boundaries, for the mixed-precision rules.

One cheap pass with the stdlib `ast` module (no libcst) over every linted file. A file that
mentions none of the words below cannot contribute a fact and is not even parsed; a file that
does not parse is skipped (the engine reports its syntax error on its own).

What it records:

- `classes`: project classes by simple name, each a `ClassInfo` with its kind ("module" for
  `nn.Module` subclasses, directly or through other project classes; "function" for
  `torch.autograd.Function` subclasses), for Functions whether `forward` is protected by
  `custom_fwd(cast_inputs=torch.float32)`, for Modules the fp16 hazards of `forward` (own, or
  inherited from a project base that defines it).
- `autocast_sites`: every fp16 autocast (`with` item or decorator) as a `Site`.
- `scaler_sites`: every `GradScaler(...)` construction.
- `region_calls`: project classes whose instances (or `.apply`) are called directly inside an fp16
  autocast region; TNL301 reports those at the call and not again at the op.

Everything is plain data (picklable); `merge` combines two indexes (then `finalize` again).
"""

from __future__ import annotations

import ast
import copy
import os
import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

# A file can only matter if it mentions one of these.
NEEDLES = ("autocast", "Module", "Function", "GradScaler", "forward")

FP16_MAX = 65504.0
FP16_TINY = 6.1e-5

MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.modules.Module"})
FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
AUTOCAST_GENERIC = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
AUTOCAST_CUDA = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST_CPU = frozenset({"torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast"})
AUTOCAST_ALL = AUTOCAST_GENERIC | AUTOCAST_CUDA | AUTOCAST_CPU
GRAD_SCALERS = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.GradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
    }
)
CUSTOM_FWD = frozenset(
    {"torch.amp.custom_fwd", "torch.amp.autocast_mode.custom_fwd", "torch.cuda.amp.custom_fwd",
     "torch.cuda.amp.autocast_mode.custom_fwd"}
)
FP16_DTYPES = frozenset({"torch.float16", "torch.half"})
FP32_DTYPES = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})

# Ops that CUDA autocast runs in fp32 (or that promote): their result is no fp16 hazard.
FP32_OPS = frozenset(
    {
        "exp", "expm1", "log", "log2", "log10", "log1p", "pow", "float_power", "sum", "nansum", "prod",
        "cumsum", "cumprod", "softmax", "log_softmax", "logsumexp", "norm", "vector_norm", "matrix_norm",
        "layer_norm", "group_norm", "rms_norm", "batch_norm", "instance_norm", "rsqrt", "reciprocal",
        "softplus", "cosine_similarity", "normalize", "float", "double", "acos", "asin", "cosh", "sinh",
        "tan", "erfinv", "mse_loss", "l1_loss", "smooth_l1_loss", "cross_entropy", "nll_loss", "kl_div",
        "binary_cross_entropy_with_logits", "dist", "cdist", "pdist", "renorm",
    }
)
# Calls whose value is a plain Python number.
NUMBER_CALLS = frozenset({"len", "int", "float", "round", "abs", "min", "max", "size", "numel", "dim", "item"})
# Methods that keep their receiver's dtype.
PASS_METHODS = frozenset(
    {"view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "contiguous", "flatten", "expand",
     "expand_as", "view_as", "clone", "detach", "masked_fill", "clamp", "clamp_min", "clip", "narrow",
     "chunk", "split", "t", "mT", "flip", "roll", "repeat", "type_as", "__getitem__"}
)
HAZARD_CALLS = {
    "sqrt": "sqrt", "mean": "mean", "var": "var", "std": "std", "var_mean": "var", "std_mean": "std",
    "sigmoid": "sigmoid", "expit": "sigmoid",
}


@dataclass
class Site:
    path: str
    line: int
    col: int = 0  # 0-based character column
    device: str = "cuda"


@dataclass
class Hazard:
    op: str  # a short description: "`x * x` product", "`sqrt`", ...
    path: str
    line: int
    col: int  # 0-based character column of the expression's start
    end_line: int = 0
    end_col: int = 0
    apply_of: Optional[Tuple[str, Optional[str]]] = None  # (name, qualname) of a Function's .apply


@dataclass
class ClassInfo:
    name: str
    path: str
    line: int
    bases: List[Tuple[str, Optional[str]]] = field(default_factory=list)  # (simple name, qualname)
    kind: str = ""  # "module", "function" or "": through project bases once finalized
    protected: bool = False  # Function: forward has custom_fwd(cast_inputs=torch.float32)
    has_forward: bool = False
    hazards: List[Hazard] = field(default_factory=list)  # its own forward's, as found
    direct_kind: str = ""  # from its torch bases alone
    fp16_hazards: List[Hazard] = field(default_factory=list)  # Modules, once finalized

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class ProjectIndex:
    classes: Dict[str, List[ClassInfo]] = field(default_factory=dict)
    autocast_sites: List[Site] = field(default_factory=list)
    scaler_sites: List[Site] = field(default_factory=list)
    # (path of the call, simple name, qualname) of classes called inside fp16 autocast regions
    region_calls: List[Tuple[str, str, Optional[str]]] = field(default_factory=list)
    # path -> the names called in that file (`Head(`): a class never constructed runs nowhere
    called: Dict[str, FrozenSet[str]] = field(default_factory=dict)
    files: int = 0  # files parsed (the rest were skipped by the pre-filter or a syntax error)

    @classmethod
    def empty(cls) -> "ProjectIndex":
        return cls()

    # -- queries ---------------------------------------------------------------------------------
    def lookup(self, name: str, qual: Optional[str], from_path: str) -> Optional[ClassInfo]:
        """The project class a reference means: `name` as written, `qual` its qualified name through
        the imports (None for a local or relatively imported name). None when unknown or ambiguous."""
        if qual is not None and qual.startswith("torch."):
            return None
        if qual is not None:
            name = qual.rsplit(".", 1)[-1]
        found = self.classes.get(name, [])
        if not found:
            return None
        if qual is None or "." not in qual:
            local = [c for c in found if c.path == from_path]
            if len(local) == 1:
                return local[0]
            return found[0] if len(found) == 1 else None
        module = qual.rsplit(".", 1)[0]
        matching = [c for c in found if _path_is_module(c.path, module)]
        if len(matching) == 1:
            return matching[0]
        if len(found) == 1 and module.split(".")[0] in _path_parts(found[0].path):
            return found[0]  # re-exported by its own package
        return None

    def constructed(self, info: ClassInfo) -> bool:
        """Whether the class, or a class derived from it, is called (constructed) in some file."""
        names = {info.name} | {
            c.name for cs in self.classes.values() for c in cs if any(base == info.name for base, _ in c.bases)
        }
        return any(names & called for called in self.called.values())

    def fp16_sites(self) -> List[Site]:
        return sorted(self.autocast_sites, key=lambda s: (s.path, s.line, s.col))

    def has_scaler(self) -> bool:
        return bool(self.scaler_sites)

    def called_in_region(self, info: ClassInfo) -> bool:
        """Whether the class, or a subclass running its forward, is called in an fp16 region."""
        mine = {(h.path, h.line) for h in info.fp16_hazards}
        for path, name, qual in self.region_calls:
            called = self.lookup(name, qual, path)
            if called is info or (called is not None and mine & {(h.path, h.line) for h in called.fp16_hazards}):
                return True
        return False

    # -- building ----------------------------------------------------------------------------------
    def with_file(self, path: str, text: str) -> "ProjectIndex":
        """This index with `path`'s facts replaced by those of `text`: the fix loop re-lints a
        rewritten file against the project as it now is (a Function just given custom_fwd)."""
        rest = ProjectIndex(
            classes={name: [c for c in infos if c.path != path] for name, infos in self.classes.items()},
            autocast_sites=[s for s in self.autocast_sites if s.path != path],
            scaler_sites=[s for s in self.scaler_sites if s.path != path],
            region_calls=[call for call in self.region_calls if call[0] != path],
            called={p: names for p, names in self.called.items() if p != path},
            files=self.files,
        )
        return rest.merge(index_file(path, text) or ProjectIndex.empty())

    def merge(self, other: "ProjectIndex") -> "ProjectIndex":
        """Both indexes' facts in a new one (finalized again)."""
        merged = ProjectIndex()
        for source in (self, other):
            # finalize() writes to each ClassInfo: copies keep both inputs untouched
            merged.absorb(source, copy_classes=True)
        merged.finalize()
        return merged

    def absorb(self, part: "ProjectIndex", copy_classes: bool = False) -> None:
        """Add `part`'s facts to this index (not finalized)."""
        for name, infos in part.classes.items():
            self.classes.setdefault(name, []).extend(copy.copy(i) if copy_classes else i for i in infos)
        self.autocast_sites.extend(part.autocast_sites)
        self.scaler_sites.extend(part.scaler_sites)
        self.region_calls.extend(part.region_calls)
        self.called.update(part.called)
        self.files += part.files

    def finalize(self) -> None:
        """Resolve class kinds through project bases, inherited forwards and Function hazards."""
        infos = [c for cs in self.classes.values() for c in cs]
        for info in infos:
            info.kind = info.direct_kind
        for _ in range(8):
            changed = False
            for info in infos:
                if info.kind:
                    continue
                for name, qual in info.bases:
                    base = self.lookup(name, qual, info.path)
                    if base is not None and base is not info and base.kind:
                        info.kind = base.kind
                        if not info.has_forward:
                            info.protected = base.protected
                        changed = True
                        break
            if not changed:
                break
        for info in infos:
            info.fp16_hazards = self._resolved_hazards(info, 0) if info.kind == "module" else []

    def _resolved_hazards(self, info: ClassInfo, depth: int) -> List[Hazard]:
        if not info.has_forward:
            if depth > 8:
                return []
            for name, qual in info.bases:
                base = self.lookup(name, qual, info.path)
                if base is not None and base is not info and base.kind == "module":
                    return self._resolved_hazards(base, depth + 1)
            return []
        kept = []
        for hazard in info.hazards:
            if hazard.apply_of is not None:
                fn = self.lookup(hazard.apply_of[0], hazard.apply_of[1], hazard.path)
                if fn is None or fn.kind != "function" or fn.protected:
                    continue
            kept.append(hazard)
        return kept


def _path_parts(path: str) -> List[str]:
    return os.path.normpath(path).replace("\\", "/").split("/")


def _path_is_module(path: str, module: str) -> bool:
    stem = os.path.normpath(path).replace("\\", "/")
    if stem.endswith(".py"):
        stem = stem[:-3]
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    suffix = module.replace(".", "/")
    return stem == suffix or stem.endswith("/" + suffix)


# ---------------------------------------------------------------------------------------------
# Values: the small vocabulary shared with the libcst side (the rules build the same shapes)


def classify_autocast(qual: Optional[str], pos: Sequence[object], kw: Dict[str, object]) -> Optional[str]:
    """The device of an fp16 autocast call, else None.

    `pos`/`kw` hold simplified argument values: a str for a string literal, True/False for those
    literals, ("q", "torch.float16") for a dotted name through the imports, None for anything else.
    """
    if qual in AUTOCAST_GENERIC:
        names = ("device_type", "dtype", "enabled", "cache_enabled")
        device: object = None
    elif qual in AUTOCAST_CUDA:
        names = ("enabled", "dtype", "cache_enabled")
        device = "cuda"
    elif qual in AUTOCAST_CPU:
        names = ("enabled", "dtype", "cache_enabled")
        device = "cpu"
    else:
        return None
    args = dict(zip(names, pos))
    args.update(kw)
    if "device_type" in names:
        device = args.get("device_type")
    if args.get("enabled", True) is False:
        return None
    if "dtype" in args:
        dtype = args["dtype"]
        if not (isinstance(dtype, tuple) and dtype[1] in FP16_DTYPES):
            return None  # bf16, fp32 or a dtype we cannot see: not known to be fp16
        return device if isinstance(device, str) else "cuda"
    if isinstance(device, str) and device.split(":")[0] == "cuda":
        return "cuda"  # CUDA autocast defaults to fp16 (CPU to bf16)
    return None


def is_cast_fp32(qual: Optional[str], kw: Dict[str, object]) -> bool:
    """`custom_fwd(..., cast_inputs=torch.float32)`."""
    value = kw.get("cast_inputs")
    return qual in CUSTOM_FWD and isinstance(value, tuple) and value[1] in FP32_DTYPES


# ---------------------------------------------------------------------------------------------
# The ast pass over one file


class _Imports:
    def __init__(self, tree: ast.Module) -> None:
        self.aliases: Dict[str, str] = {}
        for node in _statements(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        self.aliases[head] = head
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualname(self, expr: ast.AST) -> Optional[str]:
        parts: List[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        head = self.aliases.get(expr.id)
        if head is None:
            if expr.id != "torch":
                return None
            head = "torch"
        parts.append(head)
        return ".".join(reversed(parts))


def _simple(imports: _Imports, expr: ast.AST) -> object:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bool)):
        return expr.value
    if isinstance(expr, (ast.Name, ast.Attribute)):
        qual = imports.qualname(expr)
        return ("q", qual) if qual is not None else None
    return None


def _call_shape(imports: _Imports, call: ast.Call):
    pos: List[object] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            break
        pos.append(_simple(imports, arg))
    kw = {k.arg: _simple(imports, k.value) for k in call.keywords if k.arg is not None}
    return imports.qualname(call.func), pos, kw


def _autocast_device(imports: _Imports, expr: ast.AST) -> Optional[str]:
    if not isinstance(expr, ast.Call):
        return None
    return classify_autocast(*_call_shape(imports, expr))


def _is_disabled_autocast(imports: _Imports, expr: ast.AST) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    qual, pos, kw = _call_shape(imports, expr)
    if qual not in AUTOCAST_ALL:
        return False
    names = ("device_type", "dtype", "enabled") if qual in AUTOCAST_GENERIC else ("enabled",)
    args = dict(zip(names, pos))
    args.update(kw)
    return args.get("enabled") is False


def _char_col(lines: List[str], line: int, byte_col: int) -> int:
    try:
        text = lines[line - 1]
    except IndexError:
        return byte_col
    if text.isascii():
        return byte_col
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _method_name(call: ast.Call) -> Optional[str]:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _number(expr: ast.AST) -> Optional[float]:
    sign = 1.0
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        sign = -1.0 if isinstance(expr.op, ast.USub) else 1.0
        expr = expr.operand
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool):
        return sign * float(expr.value)
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "float"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Constant)
        and isinstance(expr.args[0].value, str)
    ):
        try:
            return sign * float(expr.args[0].value)
        except ValueError:
            return None
    return None


class _Forward:
    """The fp16 hazards of one `forward` body."""

    def __init__(self, file: "_File", func: ast.FunctionDef, init_small: Dict[str, float]) -> None:
        self.file = file
        self.imports = file.imports
        self.func = func
        self.init_small = init_small
        self.assigned: Dict[str, List[ast.AST]] = {}
        for node in self._walk(func):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned.setdefault(target.id, []).append(node.value)
                    else:
                        for inner in ast.walk(target):
                            if isinstance(inner, ast.Name):
                                self.assigned.setdefault(inner.id, []).extend([None, None])  # type: ignore[list-item]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                self.assigned.setdefault(node.target.id, []).extend([None, None])  # type: ignore[list-item]
        self.hazards: List[Hazard] = []

    def _walk(self, root: ast.AST):
        """Nodes of the body, not inside nested defs/lambdas/classes or autocast(enabled=False)."""
        stack = list(ast.iter_child_nodes(root)) if isinstance(root, ast.FunctionDef) else [root]
        stack.reverse()
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, ast.With) and any(_is_disabled_autocast(self.imports, i.context_expr) for i in node.items):
                continue
            yield node
            children = list(ast.iter_child_nodes(node))
            children.reverse()
            stack.extend(children)

    def _value(self, expr: ast.AST) -> Optional[ast.AST]:
        if isinstance(expr, ast.Name):
            values = self.assigned.get(expr.id, [])
            return values[0] if len(values) == 1 else None
        return None

    def fp32(self, expr: ast.AST, depth: int = 0) -> bool:
        """Whether `expr` is a float32 (or wider) tensor under CUDA autocast."""
        if depth > 12:
            return False
        if isinstance(expr, ast.Name):
            value = self._value(expr)
            return value is not None and self.fp32(value, depth + 1)
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, ast.Pow):
                return True
            return self.fp32(expr.left, depth + 1) or self.fp32(expr.right, depth + 1)
        if isinstance(expr, ast.UnaryOp):
            return self.fp32(expr.operand, depth + 1)
        if isinstance(expr, ast.Subscript):
            return self.fp32(expr.value, depth + 1)
        if isinstance(expr, ast.Attribute) and expr.attr in ("values", "real", "T", "mT"):
            return self.fp32(expr.value, depth + 1)
        if isinstance(expr, ast.Call):
            qual = self.imports.qualname(expr.func)
            name = qual.rsplit(".", 1)[-1] if qual else _method_name(expr)
            if name in FP32_OPS:
                return True
            if name in ("to", "type"):
                dtypes = [_simple(self.imports, a) for a in expr.args] + [
                    _simple(self.imports, k.value) for k in expr.keywords if k.arg == "dtype"
                ]
                return any(isinstance(d, tuple) and d[1] in FP32_DTYPES for d in dtypes)
            if qual is None and name in PASS_METHODS and isinstance(expr.func, ast.Attribute):
                return self.fp32(expr.func.value, depth + 1)
            if qual is not None and qual.startswith("torch.") and expr.args:
                return self.fp32(expr.args[0], depth + 1)
            if qual is None and isinstance(expr.func, ast.Attribute) and name not in ("half", "bfloat16"):
                return self.fp32(expr.func.value, depth + 1)
        return False

    def tensor(self, expr: ast.AST, depth: int = 0) -> bool:
        """Whether `expr` is certainly a tensor computed here (not a Python number, not unknown)."""
        if depth > 12 or _number(expr) is not None:
            return False
        if isinstance(expr, ast.Name):
            value = self._value(expr)
            return value is not None and self.tensor(value, depth + 1)
        if isinstance(expr, ast.BinOp):
            return self.tensor(expr.left, depth + 1) or self.tensor(expr.right, depth + 1)
        if isinstance(expr, ast.UnaryOp):
            return self.tensor(expr.operand, depth + 1)
        if isinstance(expr, ast.Call):
            qual = self.imports.qualname(expr.func)
            if qual is not None:
                return qual.startswith("torch.")
            name = _method_name(expr)
            if isinstance(expr.func, ast.Name) or name is None:
                return False
            return name not in NUMBER_CALLS and not isinstance(expr.func.value, ast.Constant)
        return False

    def run(self) -> List[Hazard]:
        if any(self._protective(d) for d in self.func.decorator_list):
            return []
        for node in self._walk(self.func):
            found = self._hazard(node)
            if found is not None:
                op, apply_of = found
                self._add(node, op, apply_of)
        return self.hazards

    def _protective(self, deco: ast.AST) -> bool:
        if not isinstance(deco, ast.Call):
            return False
        qual, _, kw = _call_shape(self.imports, deco)
        return is_cast_fp32(qual, kw) or _is_disabled_autocast(self.imports, deco)

    def _add(self, node: ast.AST, op: str, apply_of=None) -> None:
        lines = self.file.lines
        line, end_line = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
        col = _char_col(lines, line, node.col_offset)
        end_col = _char_col(lines, end_line, getattr(node, "end_col_offset", 0) or 0)
        if any(h.line == line for h in self.hazards):
            return  # one hazard per line is enough
        self.hazards.append(Hazard(op, self.file.path, line, col, end_line, end_col, apply_of))

    def _hazard(self, node: ast.AST):
        imports = self.imports
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult) and ast.dump(node.left) == ast.dump(node.right):
                if _number(node.left) is None and not self.fp32(node.left):
                    return "`x * x` product (overflows fp16 above 255)", None
            if isinstance(node.op, ast.Div) and self.tensor(node.right) and not self.fp32(node):
                return "`/` division", None
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, float) and 0 < node.value < FP16_TINY:
            return f"eps {node.value!r} (< 6.1e-5 rounds to 0 in fp16)", None
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Load)
            and node.attr in self.init_small
        ):
            return f"`self.{node.attr}` = {self.init_small[node.attr]!r} (< 6.1e-5 rounds to 0 in fp16)", None
        if not isinstance(node, ast.Call):
            return None
        qual = imports.qualname(node.func)
        method = _method_name(node) if qual is None else None
        for kw in node.keywords:
            value = _simple(imports, kw.value)
            if kw.arg == "dtype" and isinstance(value, tuple) and value[1] in FP16_DTYPES:
                return "explicit `dtype=torch.float16`", None
        if method == "half":
            return "explicit `.half()`", None
        if method == "to" and any(
            isinstance(v, tuple) and v[1] in FP16_DTYPES for v in (_simple(imports, a) for a in node.args)
        ):
            return "explicit `.to(torch.float16)`", None
        if method == "apply" and isinstance(node.func, ast.Attribute):
            target = node.func.value
            if isinstance(target, (ast.Name, ast.Attribute)):
                name = target.id if isinstance(target, ast.Name) else target.attr
                ref_qual = imports.qualname(target)
                if ref_qual is None or not ref_qual.startswith("torch."):
                    return f"custom autograd.Function `{name}.apply`", (name, ref_qual)
            return None
        if method in ("masked_fill", "masked_fill_") or qual == "torch.masked_fill":
            args = list(node.args)
            value = args[-1] if len(args) >= (3 if qual else 2) else None
            value = next((k.value for k in node.keywords if k.arg == "value"), value)
            number = _number(value) if value is not None else None
            if number is not None and abs(number) > FP16_MAX and number not in (float("inf"), float("-inf")):
                receiver = node.args[0] if qual else node.func.value  # type: ignore[union-attr]
                if not self.fp32(receiver):
                    return f"`masked_fill` with {number:g} (beyond the fp16 range, 65504)", None
            return None
        name = qual.rsplit(".", 1)[-1] if qual and qual.startswith("torch.") else method
        if name in HAZARD_CALLS:
            if qual is not None:
                if not node.args:
                    return None
                receiver = node.args[0]
            else:
                receiver = node.func.value  # type: ignore[union-attr]
                if isinstance(receiver, ast.Name) and receiver.id in imports.aliases:
                    return None  # np.mean(...) and alike
                if isinstance(receiver, ast.Name) and receiver.id in ("math", "np", "numpy", "statistics"):
                    return None
            if self.fp32(receiver) or (qual is None and _number(receiver) is not None):
                return None
            return f"`{HAZARD_CALLS[name]}`", None
        return None


class _File:
    def __init__(self, path: str, text: str, tree: ast.Module) -> None:
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.tree = tree
        self.imports = _Imports(tree)
        self.classes: List[ClassInfo] = []
        self.autocast_sites: List[Site] = []
        self.scaler_sites: List[Site] = []
        self.region_calls: List[Tuple[str, str, Optional[str]]] = []

    def run(self) -> None:
        if "GradScaler" in self.text:  # the one fact found inside expressions: walk them only then
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Call) and self.imports.qualname(node.func) in GRAD_SCALERS:
                    self._scaler(node)
        autocast = "autocast" in self.text
        for node in _statements(self.tree):
            if isinstance(node, ast.ClassDef):
                self._class(node)
            elif not autocast:
                continue
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    device = _autocast_device(self.imports, item.context_expr)
                    if device is not None:
                        self._site(item.context_expr, device)
                        self._region(node.body, None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in node.decorator_list:
                    device = _autocast_device(self.imports, deco)
                    if device is not None:
                        self._site(deco, device)
                        self._region(node.body, None)

    def _scaler(self, node: ast.Call) -> None:
        qual, pos, kw = _call_shape(self.imports, node)
        enabled = kw.get("enabled", pos[5] if qual.startswith("torch.amp") and len(pos) > 5 else True)  # type: ignore[union-attr]
        if enabled is not False:
            self.scaler_sites.append(Site(self.path, node.lineno, _char_col(self.lines, node.lineno, node.col_offset)))

    def _site(self, call: ast.AST, device: str) -> None:
        line = call.lineno
        self.autocast_sites.append(Site(self.path, line, _char_col(self.lines, line, call.col_offset), device))

    def _class(self, node: ast.ClassDef) -> None:
        bases: List[Tuple[str, Optional[str]]] = []
        kind = ""
        for base in node.bases:
            qual = self.imports.qualname(base)
            if qual in MODULE_BASES:
                kind = "module"
            elif qual in FUNCTION_BASES:
                kind = kind or "function"
            elif isinstance(base, ast.Name):
                bases.append((base.id, qual))
            elif isinstance(base, ast.Attribute):
                bases.append((base.attr, qual))
        info = ClassInfo(node.name, self.path, node.lineno, bases, kind, direct_kind=kind)
        forward = next(
            (s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "forward"),
            None,
        )
        if forward is not None:
            info.has_forward = True
            for deco in forward.decorator_list:
                if isinstance(deco, ast.Call):
                    qual, _, kw = _call_shape(self.imports, deco)
                    if is_cast_fp32(qual, kw):
                        info.protected = True
            # Hazards are recorded for every class with a forward; only Modules keep them.
            if kind != "function":
                info.hazards = _Forward(self, forward, self._init_small(node)).run()  # type: ignore[arg-type]
        self.classes.append(info)

    def _init_small(self, node: ast.ClassDef) -> Dict[str, float]:
        """`self.eps = 1e-8` (or a parameter defaulting to it) in `__init__`."""
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            return {}
        defaults: Dict[str, float] = {}
        args = init.args
        positional = args.posonlyargs + args.args
        for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            value = _number(default)
            if value is not None:
                defaults[arg.arg] = value
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            value = _number(default) if default is not None else None
            if value is not None:
                defaults[arg.arg] = value
        small: Dict[str, float] = {}
        counts: Dict[str, int] = {}
        for stmt in ast.walk(init):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    counts[target.attr] = counts.get(target.attr, 0) + 1
                    value = _number(stmt.value)
                    if value is None and isinstance(stmt.value, ast.Name):
                        value = defaults.get(stmt.value.id)
                    if value is not None and 0 < value < FP16_TINY:
                        small[target.attr] = value
        return {k: v for k, v in small.items() if counts.get(k) == 1}

    # -- calls inside an fp16 region -------------------------------------------------------------
    def _region(self, body: List[ast.stmt], _unused) -> None:
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call):
                    ref = self._callee_class(node)
                    if ref is not None:
                        self.region_calls.append((self.path, ref[0], ref[1]))

    def _callee_class(self, call: ast.Call) -> Optional[Tuple[str, Optional[str]]]:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("apply", "forward"):
            if func.attr == "apply":
                return self._class_ref(func.value)
            func = func.value
        if isinstance(func, ast.Call):  # `MyHead()(x)`
            value: Optional[ast.AST] = func
        else:
            value = self._assigned_value(func)
        if isinstance(value, ast.Call):
            value = _unwrap_module_methods(value)
            if isinstance(value, ast.Call):
                return self._class_ref(value.func)
        return None

    def _class_ref(self, expr: ast.AST) -> Optional[Tuple[str, Optional[str]]]:
        if isinstance(expr, ast.Name):
            return expr.id, self.imports.qualname(expr)
        if isinstance(expr, ast.Attribute):
            qual = self.imports.qualname(expr)
            return (expr.attr, qual) if qual is not None else None
        return None

    def _assigned_value(self, expr: ast.AST) -> Optional[ast.AST]:
        """The value of `name` (single assignment in its function or module) or `self.attr` (single
        assignment in its class)."""
        if isinstance(expr, ast.Name):
            scope = self._scope_of(expr)
            values = [
                n.value
                for n in _walk_scope(scope)
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)
            ]
            return values[0] if len(values) == 1 else None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = self._class_of(expr)
            if cls is None:
                return None
            values = [
                n.value
                for n in ast.walk(cls)
                if isinstance(n, ast.Assign)
                and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                    and t.attr == expr.attr
                    for t in n.targets
                )
            ]
            return values[0] if len(values) == 1 else None
        return None

    def _parents(self) -> Dict[int, ast.AST]:
        parents = getattr(self, "_parent_map", None)
        if parents is None:
            parents = {id(c): p for p in ast.walk(self.tree) for c in ast.iter_child_nodes(p)}
            self._parent_map = parents
        return parents

    def _scope_of(self, node: ast.AST) -> ast.AST:
        parents = self._parents()
        current = parents.get(id(node))
        while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            current = parents.get(id(current))
        return current if current is not None else self.tree

    def _class_of(self, node: ast.AST) -> Optional[ast.ClassDef]:
        parents = self._parents()
        current = parents.get(id(node))
        while current is not None and not isinstance(current, ast.ClassDef):
            current = parents.get(id(current))
        return current


_MODULE_METHODS = ("to", "cuda", "cpu", "train", "eval", "float", "requires_grad_")


def _unwrap_module_methods(call: ast.Call) -> ast.AST:
    """`Net().to(device).train()` -> `Net()`."""
    node: ast.AST = call
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _MODULE_METHODS
        and isinstance(node.func.value, ast.Call)
    ):
        node = node.func.value
    return node


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(tree: ast.AST):
    """Every statement (at any depth, also in functions and classes), never expressions."""
    stack = list(reversed(tree.body))  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        yield node
        for name in _BODIES:
            children = getattr(node, name, None)
            if isinstance(children, list):
                stack.extend(reversed(children))


def _walk_scope(scope: ast.AST):
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def could_matter(text: str) -> bool:
    return any(needle in text for needle in NEEDLES)


_CALLED = re.compile(r"(?<!class )\b([A-Za-z_]\w*)\s*\(")


def index_file(path: str, text: str) -> Optional[ProjectIndex]:
    """The facts of one file (not finalized); only the names it calls when it cannot matter more."""
    called = {path: frozenset(_CALLED.findall(text))}
    if not could_matter(text):
        return ProjectIndex(called=called)
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    file = _File(path, text, tree)
    file.run()
    index = ProjectIndex(called=called, files=1)
    for info in file.classes:
        index.classes.setdefault(info.name, []).append(info)
    index.autocast_sites = file.autocast_sites
    index.scaler_sites = file.scaler_sites
    index.region_calls = file.region_calls
    return index


def build_index(files: Iterable[Tuple[str, str]]) -> ProjectIndex:
    """One cheap pass over (path, text) pairs of every linted file."""
    index = ProjectIndex.empty()
    for path, text in files:
        part = index_file(path, text)
        if part is not None:
            index.absorb(part)
    index.finalize()
    return index
