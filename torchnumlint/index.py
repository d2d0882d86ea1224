"""The project pre-pass: facts that cross file boundaries, for the mixed-precision rules.

One cheap pass with the stdlib `ast` module (no libcst) over every linted file. A file that
mentions none of the words below cannot contribute a fact and is not even parsed; a file that
does not parse is skipped (the engine reports its syntax error on its own).

What it records:

- `classes`: project classes by simple name, each a `ClassInfo`: its kind ("module" for
  `nn.Module` subclasses, directly or through other project classes; "function" for
  `torch.autograd.Function` subclasses), its methods, the classes its `self.<attr>`s hold, whether
  a Function's `forward` is protected by `custom_fwd(cast_inputs=torch.float32)`, and what its own
  `forward` computes (`forward_facts.Forward`: its expressions, bindings, islands, the numbers its
  eps-like names hold, with positions). Which of that overflows in float16 is not decided here:
  TNL301 judges it under the CUDA autocast policy (`rules/mixed_precision/forward_hazards.py`).
- `functions`: every function and method as a `FuncInfo`: what it calls (`Ref`s, resolved only
  once the whole project is known). `toplevel` finds module-level functions by name.
- `regions`: every fp16 autocast region (`with` item, decorator, a name bound to an autocast, a
  `functools.partial(torch.autocast, ...)`) as its `Site` and the calls of its body; and float16
  from the frameworks, each as its site and the module it runs: `with accelerator.autocast():` and
  `accelerator.prepare(model)` where an `Accelerator`'s `mixed_precision` can be "fp16" (opt-in
  when only an argument or `accelerate config` says), Lightning's `trainer.fit(model)` under
  `Trainer(precision="16-mixed")` (its forward and steps), `deepspeed.initialize(model=model,
  config=...)` with `"fp16": {"enabled": True}`, and `model.half()` / `model.to(torch.float16)`.
- `scaler_sites`: every `GradScaler(...)` construction, GradScaler subclass and apex
  `amp.initialize`: loss scaling somewhere in the project.
- `reached` (by `finalize`): the functions an fp16 region reaches through the call graph, each with
  the first region that reaches it. TNL301 reports only hazards in what a region reaches.
- builders: a function that instantiates classes by name reaches every project `nn.Module` it can
  name: `eval(name)` or `globals()[name]` (the classes of its file and of the modules it
  star-imports: YOLO's `parse_model` over `from models.common import *`), `getattr(module, name)`
  (that module's classes), a registry's `R.build(cfg)` / `build_from_cfg(cfg, R)` (the classes
  decorated `@R.register_module()`, and detectron2's `R.get(name)(cfg)`: `@R.register()`), timm's
  `create_model(name)` (the project's `@register_model` functions; with a literal name, that one),
  and a project `nn.Module` class handed to a call as an argument (`build_model_with_cfg(ResNet,
  ...)`, `block=Bottleneck`: the callee instantiates it). What it reaches cites the builder
  (`Site.via`). Hydra's `instantiate(cfg)` is not read: its `_target_` names live in YAML files,
  which the project walk does not index.
- `aliases`: module-level `Model = DetectionModel`: a reference to the alias means the class.

The index records facts; rules make the decisions. Everything is plain data (picklable, so a
cache can store it per file); `merge` combines two indexes (then `finalize` again).
What an autocast, a GradScaler or a custom_fwd call means is read from `rules/autocast.py`, the
one AMP vocabulary the LibCST rules read too: this pass only turns `ast` calls into its shapes.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, cast

from torchnumlint import ast_nodes
from torchnumlint.ast_nodes import child_nodes
from torchnumlint import configfiles
from torchnumlint.summaries import Summaries, callers_digest, summarize
from torchnumlint.summaries import could_matter as could_summarise
from torchnumlint.forward_facts import (
    Attr,
    BinOp,
    Binding,
    Call,
    Expr,
    Forward,
    Item,
    Name,
    Number,
    Other,
    Span,
    Unary,
)
from torchnumlint.rules.module_outputs import CONTAINERS
from torchnumlint.rules.vocabulary import MODULE_METHODS
from torchnumlint.rules.autocast import (
    ACCELERATORS,
    GRAD_SCALERS,
    CallShape,
    Dotted,
    call_shape,
    classify_autocast,
    is_cast_fp32,
    is_enabled_scaler,
    is_other_autocast,
    argument_value,
    number_literal,
    with_partial,
    DEEPSPEED_INIT,
    FP16_DTYPES,
    LIGHTNING_RUNS,
    LIGHTNING_STEPS,
    accelerate_fp16,
    lightning_fp16,
)

# A file can only matter if it mentions one of these.
HYDRA_INSTANTIATE = frozenset({"hydra.utils.instantiate", "hydra.utils.call", "hydra.utils.get_class"})
NEEDLES = (
    "autocast",
    "Module",
    "Function",
    "GradScaler",
    "forward",
    "amp.initialize",
    "half(",
    "float16",
    "ccelerat",
    "Trainer",
    "deepspeed",
    "instantiate",
    "_target_",
)

MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.modules.Module"})
FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})

# Names that compiled extension modules go by (`from . import _C`, `import roi_align_cuda`).
EXTENSION_SUFFIXES = ("_C", "_cuda", "_ext", "_cpp", "_kernels", "_kernel")
EXTENSION_LOADERS = frozenset({"load", "load_ext", "load_inline", "load_extension"})
# ast: a reference to one of the project's callables, resolved once the whole project is indexed.
#   ("names", module)           every project module class of `module` (a builder's namespace)
#   ("file", path)              every project module class defined in `path` (`eval` over globals)
#   ("registry", name)          every class registered with the registry `name` (`R.build(cfg)`)
#   ("model_fns", name, at)     every function registered with `@register_model` ("" for all), timm;
#                               `at` is where `create_model` is called (path:line)
#   ("hydra", at)               every project class a config file names as `_target_` (Hydra's
#                               `instantiate(cfg)`); `at` is where `instantiate` is called (path:line)
#   ("passed", name, qual)      a project module class handed to a call: the callee constructs it
#   ("call", name, qual)        name(...): a project function (a class here is only constructed)
#   ("inst", name, qual, meth)  method `meth` of an instance of class `name` ("" calls the instance,
#                               "apply" a Function); of what project function `name` constructs
#   ("self", attr)              self.attr(...): a method, or a submodule held in the attribute
#   ("attr", attr, meth)        self.attr.meth(...)
#   ("super", meth)             super().meth(...)
Ref = Tuple[Optional[str], ...]  # qual is None where the imports do not say


@dataclass
class Site:
    path: str
    line: int
    col: int = 0  # 0-based character column
    device: str = "cuda"
    opt_in: bool = False  # enabled only by a flag (`enabled=args.fp16`)
    via: str = ""  # how it reaches what it reaches when not by plain calls ("through the builder ...")
    what: str = ""  # a framework's float16, not an autocast: what turns it on ("Accelerate's mixed precision")

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class FuncInfo:
    key: str  # "path:line:name", unique in the project
    path: str
    name: str
    cls: Optional[str] = None  # the enclosing class (a method), by simple name
    refs: List[Ref] = field(default_factory=list)
    model_factory: bool = False  # decorated `@register_model` (timm's `create_model` names it)


@dataclass
class ClassInfo:
    name: str
    path: str
    line: int
    bases: List[Tuple[str, Optional[str]]] = field(default_factory=list)  # (simple name, qualname)
    kind: str = ""  # "module", "function" or "": through project bases once finalized
    protected: bool = False  # Function: forward has custom_fwd(cast_inputs=torch.float32)
    forward: Optional[Forward] = None  # what its own `forward` computes (TNL301 judges it)
    direct_kind: str = ""  # from its torch bases alone
    methods: Dict[str, str] = field(default_factory=dict)  # name -> FuncInfo key
    registries: List[str] = field(default_factory=list)  # `@MODELS.register_module()`: "MODELS"
    attrs: Dict[str, List[Tuple[str, Optional[str]]]] = field(default_factory=dict)  # self.attr -> callables

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _pick(found: Sequence, qual: Optional[str], from_path: str):
    """The one candidate (a ClassInfo or FuncInfo) that a reference means, else None: `qual` is the
    reference's qualified name through the imports (None for a local or relatively imported one)."""
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


@dataclass
class Alias:
    """`name = target` at module level of `path`, where `target` names a class."""

    name: str
    path: str
    target: str
    qual: Optional[str]


BUILDER_KINDS = ("names", "file", "registry", "model_fns", "hydra")


@dataclass
class ProjectIndex:
    classes: Dict[str, List[ClassInfo]] = field(default_factory=dict)
    functions: Dict[str, FuncInfo] = field(default_factory=dict)  # key -> function or method
    toplevel: Dict[str, List[str]] = field(default_factory=dict)  # name -> keys of module-level functions
    regions: List[Tuple[Site, FuncInfo]] = field(default_factory=list)  # fp16 autocast, its body's calls
    scaler_sites: List[Site] = field(default_factory=list)
    reached: Dict[str, Site] = field(default_factory=dict)  # function key -> first region reaching it
    aliases: Dict[str, List[Alias]] = field(default_factory=dict)  # alias name -> where it is bound
    # "path:Class" -> its project subclasses (by `finalize`, for `self.attr` only subclasses set)
    subclasses: Dict[str, List[ClassInfo]] = field(default_factory=dict, repr=False)
    files: int = 0  # files parsed (the rest were skipped by the pre-filter or a syntax error)
    summaries: Summaries = field(default_factory=Summaries)  # what each file's helpers return
    # config file -> the dotted names it gives as Hydra `_target_`s (`configs/model/net.yaml`)
    targets: Dict[str, Tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> "ProjectIndex":
        return cls()

    # -- queries ---------------------------------------------------------------------------------
    def lookup(self, name: str, qual: Optional[str], from_path: str) -> Optional[ClassInfo]:
        """The project class a reference means (`name` as written, `qual` through the imports);
        None when unknown, a torch class, or ambiguous."""
        if qual is not None and qual.startswith("torch."):
            return None
        simple = qual.rsplit(".", 1)[-1] if qual else name
        found = self.classes.get(simple)
        if found:
            return _pick(found, qual, from_path)
        alias = _pick(self.aliases.get(simple, []), qual, from_path)
        if alias is None or alias.target == simple:
            return None
        return _pick(self.classes.get(alias.target, []), alias.qual, alias.path)

    def function(self, name: str, qual: Optional[str], from_path: str) -> Optional[FuncInfo]:
        """The project module-level function a reference means, like `lookup`."""
        if qual is not None and qual.startswith("torch."):
            return None
        keys = self.toplevel.get(qual.rsplit(".", 1)[-1] if qual else name, [])
        return _pick([self.functions[k] for k in keys], qual, from_path)

    def fp16_sites(self) -> List[Site]:
        return sorted((site for site, _ in self.regions), key=lambda s: (s.path, s.line, s.col))

    def has_scaler(self) -> bool:
        return bool(self.scaler_sites)

    def reached_by(self, info: ClassInfo, method: str = "forward") -> Optional[Site]:
        """The fp16 region that reaches the class's own `method` through the call graph, if any."""
        key = info.methods.get(method)
        return self.reached.get(key) if key is not None else None

    # -- building ----------------------------------------------------------------------------------
    def with_file(self, path: str, text: str) -> "ProjectIndex":
        """This index with `path`'s facts replaced by those of `text`: the fix loop re-lints a
        rewritten file against the project as it now is (a Function just given custom_fwd)."""
        rest = ProjectIndex(
            classes={name: [c for c in infos if c.path != path] for name, infos in self.classes.items()},
            functions={k: f for k, f in self.functions.items() if f.path != path},
            toplevel={name: [k for k in keys if self.functions[k].path != path] for name, keys in self.toplevel.items()},
            regions=[r for r in self.regions if r[0].path != path],
            scaler_sites=[s for s in self.scaler_sites if s.path != path],
            aliases={name: [a for a in found if a.path != path] for name, found in self.aliases.items()},
            files=self.files,
            summaries=self.summaries.without(path),
            targets={where: names for where, names in self.targets.items() if where != path},
        )
        return rest.merge(index_file(path, text))

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
        self.functions.update(part.functions)
        for name, keys in part.toplevel.items():
            self.toplevel.setdefault(name, []).extend(keys)
        self.regions.extend(part.regions)
        self.scaler_sites.extend(part.scaler_sites)
        for name, found in part.aliases.items():
            self.aliases.setdefault(name, []).extend(found)
        self.files += part.files
        self.summaries.absorb(part.summaries)
        self.targets.update(part.targets)

    def finalize(self) -> None:
        """Resolve class kinds through project bases, then what the fp16 regions reach."""
        infos = [c for cs in self.classes.values() for c in cs]
        for info in infos:
            info.kind = info.direct_kind
        for _ in range(8):
            changed = False
            for info in infos:
                if info.kind:
                    continue
                for base in self._bases(info):
                    if base.kind:
                        info.kind = base.kind
                        if "forward" not in info.methods:
                            info.protected = base.protected
                        changed = True
                        break
            if not changed:
                break
        self._reach()

    def _reach(self) -> None:
        """One walk over the call graph from every region, unconditional regions first: each
        function keeps the first region that reaches it (what a finding cites), and what a builder
        names keeps the builder too (`Site.via`)."""
        self.reached = {}
        self.subclasses = {}
        for info in (c for cs in self.classes.values() for c in cs):
            for base in self._bases(info):
                self.subclasses.setdefault(f"{base.path}:{base.name}", []).append(info)
        # unconditional regions first, then the project's top-level scripts (`train.py` before `tools/train.py`)
        for site, body in sorted(self.regions, key=lambda r: (r[0].opt_in, r[0].path.count("/"), r[0].path, r[0].line, r[0].col)):
            self.reached.setdefault(body.key, site)  # a decorated function is itself the region
            stack = [(body, site)]
            while stack:
                func, at = stack.pop()
                callees = [(key, at) for key in self._callees(func)]
                callees += [(key, at if at.via else dataclasses.replace(at, via=via)) for key, via in self._built(func)]
                for key, reach in callees:
                    if key not in self.reached and key in self.functions:
                        self.reached[key] = reach
                        stack.append((self.functions[key], reach))

    def _built(self, func: FuncInfo) -> Iterator[Tuple[str, str]]:
        """The forwards of the project modules a builder function can name, each with how a
        finding says it (`through the builder `parse_model` (models/yolo.py:713)`)."""
        line = func.key.rsplit(":", 2)[-2]
        for ref in func.refs:
            if ref[0] not in BUILDER_KINDS:
                continue
            if ref[0] == "model_fns":
                which = f"`{ref[1]}`" if ref[1] else "every `@register_model` function of the project"
                via = f"through the model factory `create_model` ({ref[2]}), which can name {which}"
                for factory in self.functions.values():
                    if factory.model_factory and (not ref[1] or factory.name == ref[1]):
                        yield factory.key, via
                continue
            if ref[0] == "hydra":
                via = f"through Hydra's `instantiate` ({ref[1]}), which can name every `_target_` of the project's configs"
                named = [c for cs in self.classes.values() for c in cs if self._targeted(c)]
            elif ref[0] == "registry":
                via = f"through the registry `{ref[1]}` built in `{func.name}` ({func.path}:{line})"
                named = [c for cs in self.classes.values() for c in cs if ref[1] in c.registries]
            else:
                via = f"through the builder `{func.name}` ({func.path}:{line}), which can name every module of its namespace"
                matches = (lambda c: c.path == ref[1]) if ref[0] == "file" else (lambda c: _path_is_module(c.path, cast(str, ref[1])))
                named = [c for cs in self.classes.values() for c in cs if matches(c)]
            for info in named:
                key = self._method(info, "forward") if info.kind == "module" else None
                if key is not None:
                    yield key, via

    # -- the call graph ----------------------------------------------------------------------------
    def _targeted(self, info: ClassInfo) -> bool:
        """Whether a config file names the class as a `_target_` (`models.heads.Net`)."""
        return any(
            name.rsplit(".", 1)[-1] == info.name and "." in name and _path_is_module(info.path, name.rsplit(".", 1)[0])
            for names in self.targets.values()
            for name in names
        )

    def _bases(self, info: ClassInfo) -> Iterator[ClassInfo]:
        for name, qual in info.bases:
            base = self.lookup(name, qual, info.path)
            if base is not None and base is not info:
                yield base

    def _method(self, info: ClassInfo, name: str, depth: int = 0) -> Optional[str]:
        """The key of `name` on the class or its project bases."""
        if name in info.methods or depth > 8:
            return info.methods.get(name)
        return next((k for b in self._bases(info) for k in [self._method(b, name, depth + 1)] if k), None)

    def _attr(self, info: ClassInfo, attr: str, depth: int = 0) -> List[Tuple[str, Optional[str], str]]:
        """The callables assigned to `self.attr` in the class or its project bases, with the path
        they are named from; failing those, in its project subclasses (a base's method reading
        `self.model` that only subclasses set: YOLO's `BaseModel._forward_once`)."""
        found = self._own_attr(info, attr, depth)
        if found or depth:
            return found
        return [f for sub in self.subclasses.get(f"{info.path}:{info.name}", []) for f in self._own_attr(sub, attr, 1)]

    def _own_attr(self, info: ClassInfo, attr: str, depth: int) -> List[Tuple[str, Optional[str], str]]:
        if attr in info.attrs or depth > 8:
            return [(name, qual, info.path) for name, qual in info.attrs.get(attr, [])]
        return [found for b in self._bases(info) for found in self._own_attr(b, attr, depth + 1)]

    def _instance(self, name: str, qual: Optional[str], method: str, path: str, builder: bool = True) -> Iterator[str]:
        """Keys run by `method` of an instance of `name` ("" calls it: a Module's forward, else
        `__call__`; "apply" a Function's forward). When `name` is a project function, what it
        returns is taken to be what it constructs (a builder)."""
        info = self.lookup(name, qual, path)
        if info is not None:
            if method == "apply":
                method = "forward" if info.kind == "function" else ""
            if not method:
                method = "forward" if info.kind == "module" else "__call__"
            key = self._method(info, method)
            if key is not None:
                yield key
            return
        func = self.function(name, qual, path) if builder else None
        if func is not None:
            yield func.key
            for ref in func.refs:
                if ref[0] == "call":
                    yield from self._instance(cast(str, ref[1]), ref[2], method, func.path, builder=False)

    def _callees(self, func: FuncInfo) -> Iterator[str]:
        cls = self.lookup(func.cls, None, func.path) if func.cls else None
        for ref in func.refs:
            kind = ref[0]
            if kind == "call":
                callee = self.function(cast(str, ref[1]), ref[2], func.path)
                if callee is not None:
                    yield callee.key
            elif kind == "inst":
                yield from self._instance(cast(str, ref[1]), ref[2], cast(str, ref[3]), func.path)
            elif kind == "passed":
                info = self.lookup(cast(str, ref[1]), ref[2], func.path)
                if info is not None and info.kind == "module":
                    key = self._method(info, "forward")
                    if key is not None:
                        yield key
            elif cls is None:
                continue
            elif kind == "self":
                key = self._method(cls, cast(str, ref[1]))
                if key is not None:
                    yield key
                else:
                    for name, qual, path in self._attr(cls, cast(str, ref[1])):
                        yield from self._instance(name, qual, "", path)
            elif kind == "attr":
                for name, qual, path in self._attr(cls, cast(str, ref[1])):
                    yield from self._instance(name, qual, cast(str, ref[2]), path)
            elif kind == "super":
                for base in self._bases(cls):
                    key = self._method(base, cast(str, ref[1]))
                    if key is not None:
                        yield key


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
# The ast pass over one file


# What `nn` and `F` mean in a file that star-imports and binds neither itself: the names every
# torch file gives them (YOLO's models/yolo.py reads `nn.Module` through `from models.common import *`).
_STAR_CONVENTIONS = {"nn": "torch.nn", "F": "torch.nn.functional"}


class _Imports:
    """local name -> qualified name, from every import in the file. A name imported from two
    places (`try: from torch.cuda.amp import autocast` / `except ImportError: from torch.musa.amp
    import autocast`) is not resolved: which one runs is not known here. In a file with a star
    import, `nn` and `F` that the file does not import mean what they conventionally do."""

    def __init__(self, tree: ast.Module) -> None:
        found: Dict[str, set] = {}
        star = False
        for node in _statements(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    head = alias.name.split(".")[0]
                    found.setdefault(alias.asname or head, set()).add(alias.name if alias.asname else head)
            elif isinstance(node, ast.ImportFrom):
                star = star or any(alias.name == "*" for alias in node.names)
                if not node.module or node.level:
                    continue
                for alias in node.names:
                    if alias.name != "*":
                        found.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
        self.aliases: Dict[str, str] = {name: next(iter(quals)) for name, quals in found.items() if len(quals) == 1}
        if star:
            bound = {t.id for n in _statements(tree, into_defs=False) for t in _targets(n)}
            for name, qual in _STAR_CONVENTIONS.items():
                if name not in found and name not in bound:
                    self.aliases[name] = qual

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


def _targets(node: ast.AST) -> List[ast.Name]:
    """The names a module-level statement binds with `=` (a class or function named `nn` too)."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [ast.Name(id=node.name)]
    if isinstance(node, ast.Assign):
        return [n for t in node.targets for n in ast_nodes.walk(t) if isinstance(n, ast.Name)]
    return []


def _call_shape(imports: _Imports, call: ast.Call) -> CallShape:
    """The call in the shared vocabulary (`rules/autocast.py`)."""
    args: List[Tuple[Optional[str], str, object]] = [
        (None, "*" if isinstance(a, ast.Starred) else "", _value(imports, a)) for a in call.args
    ]
    args += [(k.arg, "" if k.arg else "**", _value(imports, k.value)) for k in call.keywords]
    return call_shape(imports.qualname(call.func), args)


def _value(imports: _Imports, expr: ast.AST) -> object:
    return argument_value(expr, imports.qualname(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None)


def _is_other_autocast(imports: _Imports, expr: ast.AST) -> bool:
    """An autocast that is not fp16 (disabled, bf16, CPU): what runs under it is not fp16."""
    return isinstance(expr, ast.Call) and is_other_autocast(_call_shape(imports, expr))


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


def _is_self(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Name) and expr.id == "self"


def _bound(node: ast.AST) -> List[Tuple[str, Optional[ast.AST]]]:
    """The names one node binds: `(name, value)` for a plain `name = value`, `(name, None)` for
    any other binding (unpacking, `+=`, an annotated, loop, `with` or walrus target)."""
    if isinstance(node, ast.Assign):
        found: List[Tuple[str, Optional[ast.AST]]] = []
        for target in node.targets:
            if isinstance(target, ast.Name):
                found.append((target.id, node.value))
            else:
                found.extend((inner.id, None) for inner in ast_nodes.walk(target) if isinstance(inner, ast.Name))
        return found
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr)):
        bound = getattr(node, "target", None) or getattr(node, "optional_vars", None)
        return [(inner.id, None) for inner in ast_nodes.walk(bound) if isinstance(inner, ast.Name)] if bound is not None else []
    return []


def _assignments(nodes: Iterable[ast.AST]) -> Dict[str, List[Optional[ast.AST]]]:
    """name -> the values bound to it (None for a binding that is not a plain `name = value`,
    counted twice: such a name is never bound once, plainly)."""
    found: Dict[str, List[Optional[ast.AST]]] = {}
    for node in nodes:
        for name, value in _bound(node):
            found.setdefault(name, []).extend([value] if value is not None else [None, None])
    return found


def _single(assigned: Dict[str, List[Optional[ast.AST]]]) -> Dict[str, ast.AST]:
    """The names assigned exactly once, plainly: their value is known wherever they are read."""
    return {name: values[0] for name, values in assigned.items() if len(values) == 1 and values[0] is not None}


def _number_defaults(args: ast.arguments) -> Dict[str, float]:
    """parameter -> the number it defaults to (`eps=1e-8`), for those defaulting to a number."""
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: value for a, d in pairs for value in [number_literal(d)] if value is not None}


def _same_code(a: ast.AST, b: ast.AST) -> bool:
    """Whether two expressions are the same code, as `ast.dump` compares them (positions aside),
    without its recursion: `h * h * ... * h` nests as deep as the parser goes."""
    stack: List[Tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, ast.AST):
            stack.extend((getattr(x, f, None), getattr(y, f, None)) for f in x._fields)
        elif isinstance(x, list):
            if len(x) != len(y):  # type: ignore[arg-type]  # two trees of one shape: `y` is a list too where `x` is
                return False
            stack.extend(zip(x, y))  # type: ignore[call-overload]  # two trees of one shape: `y` is a list too where `x` is
        elif x != y:
            return False
    return True


class _ForwardRecorder:
    """Writes down what one `forward` computes (`forward_facts.Forward`), judging nothing: every
    expression of its body, decorators and defaults (not those of nested functions, lambdas or
    classes, which do not run here), the bindings of its names, the islands (a `with` whose
    autocast is not float16), which parameters may hold tensors and the numbers the others
    default to. TNL301 reads the record under the CUDA autocast policy."""

    def __init__(
        self,
        file: "_File",
        func: ast.FunctionDef,
        init_numbers: Dict[str, float],
        submodules: Dict[str, Tuple[Tuple[str, Optional[str]], ...]],
    ) -> None:
        self.file = file
        self.imports = file.imports
        self.func = func
        self.init_numbers = init_numbers
        self.submodules = submodules
        self.nodes = list(self._walk())
        self.walked = [(node, island) for node, island in self.nodes if isinstance(node, ast.expr)]
        self.positions = {id(node): i for i, (node, _) in enumerate(self.walked)}

    def _walk(self) -> Iterator[Tuple[ast.AST, bool]]:
        """The nodes under the function in pre-order, each with whether it is in an island."""
        stack = [(child, False) for child in reversed(child_nodes(self.func))]
        while stack:
            node, island = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, ast.With) and any(_is_other_autocast(self.imports, i.context_expr) for i in node.items):
                island = True
            yield node, island
            stack.extend([(child, island) for child in reversed(child_nodes(node))])

    def record(self) -> Forward:
        func, args = self.func, self.func.args
        numbers = _number_defaults(args)
        calls = [_call_shape(self.imports, d) for d in func.decorator_list if isinstance(d, ast.Call)]
        bindings = [Binding(name, self._ref(value), island) for node, island in self.nodes for name, value in _bound(node)]
        return Forward(
            exprs=[self._expr(node) for node, _ in self.walked],
            bindings=bindings,
            islands=self._islands(),
            params=frozenset(
                a.arg
                for a in (args.posonlyargs + args.args)[1:] + args.kwonlyargs
                if a.arg not in numbers and not (isinstance(a.annotation, ast.Name) and a.annotation.id in ("int", "float", "bool", "str"))
            ),
            defaults=numbers,
            init_numbers=self.init_numbers,
            submodules=self.submodules,
            returns=[self._ref(node.value) for node, _ in self.nodes if isinstance(node, ast.Return) and node.value],
            cast_inputs_fp32=any(is_cast_fp32(shape) for shape in calls),
            under_island=any(is_other_autocast(shape) for shape in calls),
        )

    def _islands(self) -> List[Tuple[int, int]]:
        runs: List[Tuple[int, int]] = []
        for i, (_, island) in enumerate(self.walked):
            if not island:
                continue
            if runs and runs[-1][1] == i:
                runs[-1] = (runs[-1][0], i + 1)
            else:
                runs.append((i, i + 1))
        return runs

    def _ref(self, node: Optional[ast.AST]) -> Optional[int]:
        return self.positions.get(id(node)) if node is not None else None

    def _expr(self, node: ast.expr) -> Expr:
        number = number_literal(node)
        if number is not None:
            return Number(number)
        ref = self._ref
        if isinstance(node, ast.Name):
            return Name(node.id)
        if isinstance(node, ast.BinOp):
            same = isinstance(node.op, ast.Mult) and _same_code(node.left, node.right)
            return BinOp(type(node.op).__name__, ref(node.left), ref(node.right), self._span(node), same)
        if isinstance(node, ast.UnaryOp):
            return Unary(ref(node.operand))
        if isinstance(node, ast.Subscript):
            return Item(ref(node.value))
        if isinstance(node, ast.Attribute):
            return Attr(node.attr, ref(node.value))
        if isinstance(node, ast.Call):
            return self._call(node)
        return Other()

    def _call(self, node: ast.Call) -> Call:
        func = node.func
        attribute = func if isinstance(func, ast.Attribute) else None
        given = [_value(self.imports, a) for a in node.args]
        given += [_value(self.imports, k.value) for k in node.keywords if k.arg == "dtype"]
        return Call(
            qual=self.imports.qualname(func),
            method=attribute.attr if attribute else None,
            receiver=self._ref(attribute.value) if attribute else None,
            args=tuple(self._ref(a) for a in node.args),
            keywords=tuple((k.arg, self._ref(k.value)) for k in node.keywords if k.arg),
            dtypes=tuple(v.qual for v in given if isinstance(v, Dotted)),
            span=self._span(node),
            kernel=ast.unparse(func) if self.file.is_extension_call(node) else None,
        )

    def _span(self, node: ast.expr) -> Span:
        lines = self.file.lines
        line, end_line = node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno
        col = _char_col(lines, line, node.col_offset)
        return Span(line, col, end_line, _char_col(lines, end_line, getattr(node, "end_col_offset", 0) or 0))


def _class_ref(imports: _Imports, expr: ast.AST) -> Optional[Tuple[str, Optional[str]]]:
    """(simple name, qualname) of a reference to a project class or function."""
    if isinstance(expr, ast.Name):
        return expr.id, imports.qualname(expr)
    if isinstance(expr, ast.Attribute):
        qual = imports.qualname(expr)
        return (expr.attr, qual) if qual is not None else None
    return None


class _File:
    def __init__(self, path: str, text: str, tree: ast.Module) -> None:
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.tree = tree
        self.imports = _Imports(tree)
        self.classes: List[ClassInfo] = []
        self.functions: List[FuncInfo] = []
        self.toplevel: Dict[str, List[str]] = {}
        self.regions: List[Tuple[Site, FuncInfo]] = []
        self.scaler_sites: List[Site] = []
        self._class_infos: Dict[int, ClassInfo] = {}  # id(ClassDef) -> its info
        self.aliases: List[Alias] = []
        self.star_modules = _star_modules(tree, path)  # `from models.common import *`
        self._several: Dict[str, List[ast.AST]] = {}  # in the function being read: names bound more than once
        self.accelerate = self._accelerate()
        module_level = list(_statements(tree, into_defs=False))
        self.module_values = _single(_assignments(module_level))
        self.extensions = self._extension_names(module_level)

    def run(self) -> None:
        if any(word in self.text for word in ("GradScaler", "amp.initialize", "scale_loss")):
            for node in ast_nodes.walk(self.tree):  # the one fact found inside expressions: walk them only then
                if isinstance(node, ast.Call) and is_enabled_scaler(_call_shape(self.imports, node)):
                    self.scaler_sites.append(self._site(node, "cuda", False))
        self._block(self.tree.body, None, self.module_values, toplevel=True)
        top = [s for s in self.tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        self._framework_regions(self._scan(top).calls, self.module_values, None)

    # -- structure -------------------------------------------------------------------------------
    def _block(
        self, body: List[ast.stmt], cls: Optional[ast.ClassDef], values: Dict[str, ast.AST], toplevel: bool = False, nested: bool = False
    ) -> None:
        """Record the classes, functions and regions of a statement list. `nested`: inside a
        function, whose scan already holds what nested functions call."""
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                self._class(stmt)
                self._block(stmt.body, stmt, self.module_values)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if nested and not any(self._autocast(d, values) for d in stmt.decorator_list):
                    self._block(stmt.body, cls, values, nested=True)  # its calls are its parent's
                else:
                    self._function(stmt, cls, toplevel)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    found = self._autocast(item.context_expr, values)
                    if found is not None:
                        site = self._site(item.context_expr, *found)
                        if _accelerator_autocast(item.context_expr):
                            site.what = "Accelerate's fp16 mixed precision"
                        body_info = FuncInfo(
                            f"{self.path}:{stmt.lineno}:<autocast>",
                            self.path,
                            "<autocast>",
                            cls.name if cls else None,
                            self._refs(self._scan(stmt.body), values),
                        )
                        self.regions.append((site, body_info))
                self._block(stmt.body, cls, values, toplevel, nested)
            elif toplevel and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self._alias(stmt)
            else:
                for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                    children = getattr(stmt, name, None)
                    if isinstance(children, list):
                        self._block(children, cls, values, toplevel, nested)

    def _function(self, node, cls: Optional[ast.ClassDef], toplevel: bool) -> None:
        scan = self._scan(node.body)
        assigned = _assignments(scan.binders)
        params = {a.arg for a in ast_nodes.walk(node.args) if isinstance(a, ast.arg)}
        values = {k: v for k, v in self.module_values.items() if k not in assigned and k not in params}
        values.update(_single(assigned))
        saved, self._several = (
            self._several,
            {name: [v for v in found if v is not None] for name, found in assigned.items() if len(found) > 1},
        )
        key = f"{self.path}:{node.lineno}:{node.name}"
        info = FuncInfo(key, self.path, node.name, cls.name if cls else None, self._refs(scan, values))
        info.refs.extend(self._builder_refs(scan, values))
        info.model_factory = toplevel and any(
            _last_name(_decorator(d)) == "register_model"
            for d in node.decorator_list
            if isinstance(_decorator(d), (ast.Name, ast.Attribute))
        )
        self.functions.append(info)
        if cls is not None and id(cls) in self._class_infos and node in cls.body:
            self._store_attrs(self._class_infos[id(cls)], node, scan.stores)
        if toplevel:
            self.toplevel.setdefault(node.name, []).append(key)
        for deco in node.decorator_list:
            found = self._autocast(deco, values)
            if found is not None:
                self.regions.append((self._site(deco, *found), info))
        self._block(node.body, cls, values, nested=True)
        self._framework_regions(scan.calls, values, cls)
        self._several = saved

    def _builder_refs(self, scan: "_Scan", values: Dict[str, ast.AST]) -> List[Ref]:
        """What a function instantiating classes by name can name (`BUILDER_KINDS`): `eval(m)` of
        a name that is not a literal, or `globals()`, name the classes of this file and of the
        modules it star-imports; `getattr(module, name)` the classes of an imported module;
        `R.build(cfg)` and `build_from_cfg(cfg, R)` the classes registered with `R`."""
        refs: List[Ref] = []
        for call in scan.calls:
            func = call.func
            name = func.id if isinstance(func, ast.Name) and func.id not in values else None
            if name in ("eval", "globals") and not (call.args and isinstance(call.args[0], ast.Constant)):
                refs += [("file", self.path)] + [("names", module) for module in self.star_modules]
            elif name == "getattr" and len(call.args) >= 2 and not isinstance(call.args[1], ast.Constant):
                module = self.imports.qualname(call.args[0])
                if module is not None and isinstance(call.args[0], ast.Name) and module not in ("torch", "torch.nn"):
                    refs.append(("names", module))
            elif name is not None and name.startswith("build_from_cfg") and len(call.args) >= 2:
                registry = call.args[1]
                if isinstance(registry, (ast.Name, ast.Attribute)):
                    refs.append(("registry", _last_name(registry)))
            elif isinstance(func, ast.Attribute) and func.attr == "build" and isinstance(func.value, (ast.Name, ast.Attribute)):
                refs.append(("registry", _last_name(func.value)))
            elif self.imports.qualname(func) in HYDRA_INSTANTIATE:
                refs.append(("hydra", f"{self.path}:{call.lineno}"))
            elif _is_registry_get(func):  # `META_ARCH_REGISTRY.get(name)(cfg)`
                refs.append(("registry", _last_name(func.func.value)))  # type: ignore[attr-defined]
            else:
                factory = self._model_factory_ref(call)
                if factory is not None:
                    refs.append(factory)
        return list(dict.fromkeys(refs))

    def _model_factory_ref(self, call: ast.Call) -> Optional[Ref]:
        """timm's `create_model(name, ...)`: ("model_fns", the literal name or "", where it is)."""
        func = call.func
        if not (isinstance(func, (ast.Name, ast.Attribute)) and _last_name(func) == "create_model"):
            return None
        named = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "model_name"), None)
        if named is None:
            return None
        literal = named.value if isinstance(named, ast.Constant) and isinstance(named.value, str) else ""
        return ("model_fns", literal, f"{self.path}:{call.lineno}")

    def _alias(self, node: ast.Assign) -> None:
        """`roi_pool = RoIPoolFunction.apply` at module level: calling `roi_pool` runs the Function;
        `Model = DetectionModel`: the alias names the class (`ProjectIndex.lookup`)."""
        target = node.targets[0]
        if isinstance(target, ast.Name) and isinstance(node.value, (ast.Name, ast.Attribute)):
            ref = _class_ref(self.imports, node.value)
            if ref is not None and ref[0] != target.id:
                self.aliases.append(Alias(target.id, self.path, *ref))
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Attribute) and node.value.attr == "apply":
            ref = _class_ref(self.imports, node.value.value)
            if ref is not None:
                key = f"{self.path}:{node.lineno}:{target.id}"
                self.functions.append(FuncInfo(key, self.path, target.id, None, [("inst", *ref, "apply")]))
                self.toplevel.setdefault(target.id, []).append(key)

    # -- autocast --------------------------------------------------------------------------------
    def _autocast(self, expr: ast.AST, values: Dict[str, ast.AST]) -> Optional[Tuple[str, bool]]:
        """(device, opt_in) of an fp16 autocast: a call, a name bound to one (`with amp:`), or a
        call of `functools.partial(torch.autocast, ...)`."""
        if isinstance(expr, ast.Name):
            expr = values.get(expr.id) or self.module_values.get(expr.id)  # type: ignore[assignment]  # None where nothing binds it: the next test returns
        if not isinstance(expr, ast.Call):
            return None
        if _accelerator_autocast(expr):  # float16 as the Accelerator's mixed_precision says
            return ("cuda", not self.accelerate) if self.accelerate is not None else None
        partial = None
        if isinstance(expr.func, ast.Name):
            bound = values.get(expr.func.id) or self.module_values.get(expr.func.id)
            partial = _call_shape(self.imports, bound) if isinstance(bound, ast.Call) else None
        return classify_autocast(with_partial(_call_shape(self.imports, expr), partial))

    # -- float16 from the frameworks -----------------------------------------------------------
    def _accelerate(self) -> Optional[bool]:
        """Whether this file's `Accelerator`s run float16 (`accelerate_fp16`): True when one says
        "fp16", False (opt-in) when one may by an argument or when none is built here (`accelerate
        config` decides), None when every one is built with another literal."""
        if "ccelerat" not in self.text:
            return None
        found = [
            accelerate_fp16(_call_shape(self.imports, node))
            for node in ast_nodes.walk(self.tree)
            if isinstance(node, ast.Call) and self.imports.qualname(node.func) in ACCELERATORS
        ]
        if True in found:
            return True
        return False if (False in found or not found) else None

    def _framework_regions(self, calls: List[ast.Call], values: Dict[str, ast.AST], cls: Optional[ast.ClassDef]) -> None:
        """The framework float16 regions among the calls of one body (see the module docstring). A
        `.half()` cast straight back (`model.half().float()`: YOLO rounds its anchors so) is none."""
        recast = {id(c.func.value) for c in calls if _method_name(c) in ("float", "double") and isinstance(c.func.value, ast.Call)}  # type: ignore[attr-defined]  # calls of `.float()`/`.double()` are method calls: their func is an Attribute
        for call in calls:
            if id(call) in recast:
                continue
            found = self._framework_region(call, values)
            if found is not None:
                opt_in, refs, what = found
                key = f"{self.path}:{call.lineno}:<fp16>"
                body = FuncInfo(key, self.path, "<fp16>", cls.name if cls else None, [r for r in refs if r is not None])
                if body.refs:
                    self.regions.append((dataclasses.replace(self._site(call, "cuda", opt_in), what=what), body))

    def _framework_region(self, call: ast.Call, values: Dict[str, ast.AST]) -> Optional[Tuple[bool, List[Optional[Ref]], str]]:
        """(opt_in, what it runs, what turns float16 on) of one call that makes a module run in
        float16, else None."""
        method = _method_name(call)
        owner = call.func.value if isinstance(call.func, ast.Attribute) else None
        if method == "prepare" and owner is not None and self.accelerate is not None and "accelerator" in ast.unparse(owner).lower():
            return not self.accelerate, [self._instance_of(a, values, "") for a in call.args], "Accelerate's fp16 mixed precision"
        if method in LIGHTNING_RUNS and isinstance(owner, ast.Name) and isinstance(values.get(owner.id), ast.Call):
            fp16 = lightning_fp16(_call_shape(self.imports, values[owner.id]))  # type: ignore[arg-type]  # an ast.Call: asked just before
            model = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "model"), None)
            if fp16 is not None and model is not None:
                refs = [self._instance_of(model, values, step) for step in LIGHTNING_STEPS]
                return not fp16, refs, "Lightning's 16-bit mixed precision"
        if self.imports.qualname(call.func) in DEEPSPEED_INIT:
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            fp16 = _deepspeed_fp16(kw.get("config", kw.get("config_params")), values)
            if fp16 is not None and "model" in kw:
                return not fp16, [self._instance_of(kw["model"], values, "")], "DeepSpeed's fp16"
        if owner is not None and (method == "half" and not call.args or method == "to" and self._to_fp16(call)):
            return False, [self._instance_of(owner, values, "")], "a float16 model"
        return None

    def _to_fp16(self, call: ast.Call) -> bool:
        """`.to(torch.float16)`, `.to(device, torch.half)`, `.to(dtype=torch.float16)`."""
        given = list(call.args) + [k.value for k in call.keywords if k.arg == "dtype"]
        return any(self.imports.qualname(a) in FP16_DTYPES for a in given if isinstance(a, (ast.Name, ast.Attribute)))

    def _instance_of(self, expr: ast.AST, values: Dict[str, ast.AST], method: str) -> Optional[Ref]:
        """`method` of the project module `expr` holds: a construction, or a name bound to one."""
        if isinstance(expr, ast.Name):
            if expr.id in values:
                return self._value_ref(values[expr.id], method)
            return self._several_ref(expr.id, method) if expr.id in self._several else None
        return self._value_ref(expr, method) if isinstance(expr, ast.Call) else None

    def _site(self, call: Union[ast.expr, ast.stmt], device: str, opt_in: bool) -> Site:
        line = call.lineno
        return Site(self.path, line, _char_col(self.lines, line, call.col_offset), device, opt_in)

    # -- extension kernels -----------------------------------------------------------------------
    def _extension_names(self, module_level: List[ast.AST]) -> frozenset:
        """Module-level names of compiled extensions: imported under an extension-like name
        (`_C`, `roi_align_cuda`, `ext`), or loaded (`ext = load_ext("_ext", [...])`)."""
        names = set()
        for node in module_level:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    if alias.name.split(".")[-1].endswith(EXTENSION_SUFFIXES) or local.endswith(EXTENSION_SUFFIXES):
                        names.add(local)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                loader = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if loader in EXTENSION_LOADERS:
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return frozenset(names)

    def is_extension_call(self, call: ast.Call) -> bool:
        """`_C.op(...)`, `roi_align_cuda.forward(...)`, `ext_module.op(...)`, not torch's own."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return False
        parts = []
        owner = func.value
        while isinstance(owner, ast.Attribute):
            parts.append(owner.attr)
            owner = owner.value
        if not isinstance(owner, ast.Name) or owner.id in ("self", "torch") or (self.imports.qualname(owner) or "").startswith("torch"):
            return False
        return owner.id in self.extensions or any(p.endswith(EXTENSION_SUFFIXES) for p in parts + [owner.id])

    # -- classes ---------------------------------------------------------------------------------
    def _class(self, node: ast.ClassDef) -> None:
        bases: List[Tuple[str, Optional[str]]] = []
        kind = ""
        for base in node.bases:
            qual = self.imports.qualname(base)
            if qual in MODULE_BASES:
                kind = "module"
            elif qual in FUNCTION_BASES:
                kind = kind or "function"
            elif qual in GRAD_SCALERS:
                self.scaler_sites.append(self._site(node, "cuda", False))  # a GradScaler subclass
            ref = _class_ref(self.imports, base)
            if ref is not None and qual not in MODULE_BASES | FUNCTION_BASES:
                bases.append(ref)
        info = ClassInfo(node.name, self.path, node.lineno, bases, kind, direct_kind=kind)
        info.registries = [r for r in map(_registry_of, node.decorator_list) if r is not None]
        methods = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        info.methods = {m.name: f"{self.path}:{m.lineno}:{m.name}" for m in methods}
        self._class_infos[id(node)] = info  # its methods fill `attrs` in
        forward = next((m for m in methods if m.name == "forward"), None)
        if forward is not None:
            for deco in forward.decorator_list:
                if isinstance(deco, ast.Call):
                    if is_cast_fp32(_call_shape(self.imports, deco)):
                        info.protected = True
            if isinstance(forward, ast.FunctionDef):
                info.forward = _ForwardRecorder(self, forward, self._init_numbers(node), self._submodules(node)).record()
        self.classes.append(info)

    def _store_attrs(self, info: ClassInfo, method, stores: List[Tuple[str, ast.AST]]) -> None:
        """self.attr -> the project callables that may be its value: what `self.attr = ...`
        calls (`Encoder(...)`, `nn.ModuleList([Block() ...])`, `build_head(cfg)`), a parameter's
        annotation (`self.unet = unet` with `unet: UNet`), `register_modules(unet=unet)`."""
        annotations = {a.arg: a.annotation for a in method.args.args + method.args.kwonlyargs if a.annotation}
        for attr, value in stores:
            if isinstance(value, ast.Name) and value.id in annotations:
                refs = [_class_ref(self.imports, annotations[value.id])]
            else:
                refs = [_class_ref(self.imports, _constructor(c)) for c in ast_nodes.walk(value) if isinstance(c, ast.Call)]
            info.attrs.setdefault(attr, []).extend(r for r in refs if r is not None)

    def _submodules(self, node: ast.ClassDef) -> Dict[str, Tuple[Tuple[str, Optional[str]], ...]]:
        """`self.attr = Layer(...)` in `__init__`: attr -> the layers or project modules that may be
        constructed there (`module_outputs.py` says what calling each gives). Both branches of a
        conditional count; a value passed in (`act if isinstance(act, nn.Module) else
        nn.Identity()`) beside constructed ones is left out; anything else is `("", None)`.
        `self.default_act` reads a class attribute (`default_act = nn.SiLU()`)."""
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            return {}
        class_values = _single(_assignments(s for s in node.body if isinstance(s, ast.Assign)))
        found: Dict[str, List[Tuple[str, Optional[str]]]] = {}
        for stmt in ast_nodes.walk(init):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Attribute) and _is_self(target.value):
                    made = self._constructed(stmt.value, class_values, 0)
                    found.setdefault(target.attr, []).extend(made or [("", None)])
        return {attr: tuple(dict.fromkeys(refs)) for attr, refs in found.items()}

    def _constructed(self, value: ast.AST, class_values: Dict[str, ast.AST], depth: int) -> List[Tuple[str, Optional[str]]]:
        """What a value constructs, as `_submodules` reads it; [] when it constructs nothing known."""
        if depth > 4:
            return []
        if isinstance(value, ast.IfExp):
            both = [self._constructed(v, class_values, depth + 1) for v in (value.body, value.orelse)]
            made = [ref for refs in both for ref in refs]
            passed = [v for v in (value.body, value.orelse) if isinstance(v, ast.Name)]
            return made if made and (len(passed) + sum(bool(r) for r in both) == 2) else []
        if isinstance(value, ast.Attribute) and _is_self(value.value) and value.attr in class_values:
            return self._constructed(class_values[value.attr], class_values, depth + 1)
        if not isinstance(value, ast.Call):
            return []
        ref = _class_ref(self.imports, _constructor(value))
        if ref is None:
            return []
        if ref[1] in CONTAINERS:  # nn.Sequential(a, b, c): what c gives
            last = value.args[-1] if value.args and not isinstance(value.args[-1], ast.Starred) else None
            return self._constructed(last, class_values, depth + 1) if last is not None else [("", None)]
        return [ref]

    def _init_numbers(self, node: ast.ClassDef) -> Dict[str, float]:
        """`self.eps = 1e-8` (or a parameter defaulting to a number) in `__init__`, for the
        attributes assigned there once."""
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            return {}
        defaults = _number_defaults(init.args)
        numbers: Dict[str, float] = {}
        counts: Dict[str, int] = {}
        for stmt in ast_nodes.walk(init):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Attribute) and _is_self(target.value):
                    counts[target.attr] = counts.get(target.attr, 0) + 1
                    value = number_literal(stmt.value)
                    if value is None and isinstance(stmt.value, ast.Name):
                        value = defaults.get(stmt.value.id)
                    if value is not None:
                        numbers[target.attr] = value
        return {k: v for k, v in numbers.items() if counts.get(k) == 1}

    # -- calls -----------------------------------------------------------------------------------
    def _scan(self, body: List[ast.stmt]) -> "_Scan":
        """One walk over a body: its own bindings (nested scopes left out); the calls and loop
        iterables of it and of its nested functions and lambdas (a closure handed to
        `checkpoint(...)` runs here), except under a non-fp16 autocast (`enabled=False`, bf16),
        which fp16 does not reach through; and its `self.attr = value` stores."""
        scan = _Scan([], [], [], [])
        stack: List[Tuple[ast.AST, bool, bool]] = [(node, False, False) for node in body]
        while stack:
            node, nested, quiet = stack.pop()
            if isinstance(node, ast.ClassDef):
                continue
            if not nested and isinstance(node, _BINDERS):
                scan.binders.append(node)
            if isinstance(node, ast.Call):
                if not quiet:
                    scan.calls.append(node)
                if _method_name(node) == "register_modules":
                    scan.stores.extend((k.arg, k.value) for k in node.keywords if k.arg)
            elif isinstance(node, ast.Assign):
                targets = [e for t in node.targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
                scan.stores.extend((t.attr, node.value) for t in targets if isinstance(t, ast.Attribute) and _is_self(t.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and not quiet:
                scan.iters.append(node.iter)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                quiet = quiet or any(_is_other_autocast(self.imports, i.context_expr) for i in node.items)
            inner = nested or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            stack.extend([(child, inner, quiet) for child in child_nodes(node)])
        return scan

    def _refs(self, scan: "_Scan", values: Dict[str, ast.AST]) -> List[Ref]:
        """What the scanned body calls, in `Ref` form (each once)."""
        refs: Dict[Ref, None] = {}
        for call in scan.calls:
            ref = self._call_ref(call, values)
            if ref is not None:
                refs[ref] = None
        for call in scan.calls:  # `build_model_with_cfg(ResNet, ...)`, `Stage(block=Bottleneck)`
            if isinstance(call.func, ast.Name) and call.func.id in _NOT_CONSTRUCTING:
                continue
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(arg, ast.Name) and arg.id[:1].isupper() and arg.id not in values:
                    refs[("passed", arg.id, self.imports.qualname(arg))] = None
        for iterable in scan.iters:  # `for block in self.blocks: x = block(x)`
            for inner in ast_nodes.walk(iterable):
                if isinstance(inner, ast.Attribute) and _is_self(inner.value):
                    refs[("self", inner.attr)] = None
        return list(refs)

    def _call_ref(self, call: ast.Call, values: Dict[str, ast.AST]) -> Optional[Ref]:
        func = call.func
        if isinstance(func, ast.Subscript):  # self.layers[i](x)
            func = func.value
        if isinstance(func, ast.Name):
            if func.id in values:
                return self._value_ref(values[func.id], "")
            several = self._several_ref(func.id, "") if func.id in self._several else None
            return several or ("call", func.id, self.imports.qualname(func))
        if isinstance(func, ast.Call):  # Head()(x)
            return self._value_ref(func, "")
        if not isinstance(func, ast.Attribute):
            return None
        method = "" if func.attr == "forward" else func.attr
        owner = func.value
        if _is_self(owner):
            return ("self", func.attr)
        if isinstance(owner, ast.Attribute) and _is_self(owner.value):
            return ("attr", owner.attr, method)
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            return ("super", func.attr)
        if func.attr == "apply":
            ref = _class_ref(self.imports, owner)
            return ("inst", *ref, "apply") if ref is not None else None
        if isinstance(owner, ast.Name) and owner.id in values:
            return self._value_ref(values[owner.id], method)
        if isinstance(owner, ast.Name) and owner.id in self._several:
            return self._several_ref(owner.id, method)  # `model.forward(x)`, `model.encode(x)`
        if isinstance(owner, ast.Call):
            return self._value_ref(owner, method)
        return None

    def _several_ref(self, name: str, method: str) -> Optional[Ref]:
        """A name bound more than once (`model = Model(cfg).to(device)` in two branches, then
        `model = DataParallel(model)`): the one project instance its bindings construct, when they
        all that construct a project-looking class construct the same one (wrappers from torch
        and re-bindings to itself aside)."""
        values = [v for v in self._several[name] if not _wraps(v, name)]
        refs = {ref for value in values for ref in [self._value_ref(value, method)] if ref is not None}
        refs = {ref for ref in refs if not (ref[2] or "").startswith("torch.")}
        return refs.pop() if len(refs) == 1 else None

    def _value_ref(self, value: ast.AST, method: str) -> Optional[Ref]:
        """`method` of the value `value` evaluates to: an instance (`Head()`, `Net.from_pretrained(..)`,
        `Net().to(device)`), what a builder returns (`build_model(cfg)`), a Function's `.apply`."""
        if isinstance(value, ast.Attribute) and value.attr == "apply":
            ref = _class_ref(self.imports, value.value)
            return ("inst", *ref, "apply") if ref is not None else None
        if not isinstance(value, ast.Call):
            return None
        factory = self._model_factory_ref(_constructor_call(value))
        if factory is not None:
            return factory  # `model = timm.create_model(args.model).cuda()`
        built = _constructor_call(value)
        if self.imports.qualname(built.func) in HYDRA_INSTANTIATE:
            return ("hydra", f"{self.path}:{built.lineno}")  # `model = instantiate(cfg.model).to(device)`
        ref = _class_ref(self.imports, _constructor(value))
        return ("inst", *ref, method) if ref is not None else None


@dataclass
class _Scan:
    binders: List[ast.AST]  # assignments, loop and with targets
    calls: List[ast.Call]
    iters: List[ast.AST]  # what `for` loops and comprehensions iterate over
    stores: List[Tuple[str, ast.AST]]  # (attr, value) of `self.attr = value`, register_modules(attr=value)


def _accelerator_autocast(expr: ast.AST) -> bool:
    """`accelerator.autocast()`, `self.accelerator.autocast()`: Accelerate's, not torch's."""
    return (
        isinstance(expr, ast.Call) and _method_name(expr) == "autocast" and "accelerator" in ast.unparse(expr.func.value).lower()  # type: ignore[attr-defined]  # a method call (`_method_name`): its func is an Attribute
    )


def _deepspeed_fp16(config: Optional[ast.AST], values: Dict[str, ast.AST]) -> Optional[bool]:
    """DeepSpeed's config: True for a dict literal with `"fp16": {"enabled": True}`, None for one
    without it (or with `"enabled": False`), False (opt-in) for a config the code does not show
    (a JSON file, an argument)."""
    if isinstance(config, ast.Name):
        config = values.get(config.id, config)
    if not isinstance(config, ast.Dict):
        return False if config is not None else None
    for key, value in zip(config.keys, config.values):
        if isinstance(key, ast.Constant) and key.value == "fp16" and isinstance(value, ast.Dict):
            for inner_key, inner in zip(value.keys, value.values):
                if isinstance(inner_key, ast.Constant) and inner_key.value == "enabled":
                    return (
                        True
                        if isinstance(inner, ast.Constant) and inner.value is True
                        else (None if isinstance(inner, ast.Constant) else False)
                    )
    return None


def _wraps(value: ast.AST, name: str) -> bool:
    """`model = DataParallel(model)`, `model = smart_DDP(model).to(device)`: a re-binding of `name`
    to a wrapper of itself, which runs the same module."""
    return any(
        isinstance(call, ast.Call) and any(isinstance(a, ast.Name) and a.id == name for a in call.args) for call in ast_nodes.walk(value)
    )


def _last_name(expr: ast.AST) -> str:
    return expr.attr if isinstance(expr, ast.Attribute) else expr.id  # type: ignore[attr-defined]  # the registries and builders it is given are Names or Attributes


_REGISTERS = ("register_module", "register")
# builtins that take a class without constructing it
_NOT_CONSTRUCTING = frozenset({"isinstance", "issubclass", "super", "type", "getattr", "setattr", "hasattr", "print", "repr", "str", "id"})


def _decorator(deco: ast.AST) -> ast.AST:
    return deco.func if isinstance(deco, ast.Call) else deco


def _is_registry_get(func: ast.AST) -> bool:
    """`R.get(name)` called (`META_ARCH_REGISTRY.get(meta_arch)(cfg)`): a registry of upper-case
    name looked up by a name that is not a literal."""
    return (
        isinstance(func, ast.Call)
        and isinstance(func.func, ast.Attribute)
        and func.func.attr == "get"
        and isinstance(func.func.value, (ast.Name, ast.Attribute))
        and _last_name(func.func.value).isupper()
        and bool(func.args)
        and not isinstance(func.args[0], ast.Constant)
    )


def _registry_of(deco: ast.AST) -> Optional[str]:
    """`MODELS` of `@MODELS.register_module()` / `@MODELS.register_module` / `@BACKBONES.register`."""
    func = deco.func if isinstance(deco, ast.Call) else deco
    if isinstance(func, ast.Attribute) and func.attr in _REGISTERS and isinstance(func.value, (ast.Name, ast.Attribute)):
        return _last_name(func.value)
    return None


def _star_modules(tree: ast.Module, path: str) -> List[str]:
    """The modules a file star-imports, as dotted names (a relative import resolved from `path`)."""
    package = os.path.normpath(path).replace("\\", "/").split("/")[:-1]
    found = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level <= len(package) + 1 else []
                found.append(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.append(node.module)
    return found


_BINDERS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr)


def _constructor_call(call: ast.Call) -> ast.Call:
    """The call that constructs: `Net(...)` of `Net(...).to(device).eval()`."""
    while isinstance(call.func, ast.Attribute) and call.func.attr in MODULE_METHODS and isinstance(call.func.value, ast.Call):
        call = call.func.value
    return call


def _constructor(call: ast.Call) -> ast.AST:
    """What a call constructs: `Net` for `Net(...)`, `Net.from_pretrained(...)`, `Net().to(device)`."""
    node: ast.AST = call
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in MODULE_METHODS
        and isinstance(node.func.value, ast.Call)
    ):
        node = node.func.value
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute) and func.attr.startswith("from_"):
        return func.value
    return func


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(tree: ast.AST, into_defs: bool = True):
    """Every statement (at any depth, also in functions and classes unless not `into_defs`),
    never expressions."""
    stack = list(reversed(tree.body))  # type: ignore[attr-defined]  # given a parsed module
    while stack:
        node = stack.pop()
        yield node
        if not into_defs and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in _BODIES:
            children = getattr(node, name, None)
            if isinstance(children, list):
                stack.extend(reversed(children))


def could_matter(text: str) -> bool:
    return any(needle in text for needle in NEEDLES)


def index_file(path: str, text: str) -> ProjectIndex:
    """The facts of one file (not finalized); only that it exists when it cannot matter or does
    not parse. A file parsed for either kind of fact is summarised (`summaries.py`): the parse
    is the cost."""
    if configfiles.is_config(path):
        return ProjectIndex(targets={path: configfiles.hydra_targets(text)})
    known = ProjectIndex(summaries=Summaries({path: None}))
    amp = could_matter(text)
    if not (amp or could_summarise(text)):
        return known
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return known
    summary = summarize(path, tree)
    if summary.calls:
        summary = summary._replace(callers_digest=callers_digest(text, tree, summary.calls))
    index = ProjectIndex(files=1, summaries=Summaries({path: summary}))
    if not amp:
        return index
    file = _File(path, text, tree)
    file.run()
    for info in file.classes:
        index.classes.setdefault(info.name, []).append(info)
    index.functions = {f.key: f for f in file.functions}
    index.toplevel = file.toplevel
    index.regions = file.regions
    index.scaler_sites = file.scaler_sites
    for alias in file.aliases:
        index.aliases.setdefault(alias.name, []).append(alias)
    return index


def build_index(files: Iterable[Tuple[str, str]]) -> ProjectIndex:
    """One cheap pass over (path, text) pairs of every linted file."""
    index = ProjectIndex.empty()
    for path, text in files:
        index.absorb(index_file(path, text))
    index.finalize()
    return index
