"""The rules' own examples, read with `ast` from `torchnumlint/rules/**/*.py` without importing them.

The rule modules import libcst; a GPU box that has torch alone must still be able to run the very
text that the linter's tests pin (`Example.bad` and `Example.fixed`), and the reporters (SARIF's
rule descriptors) run without libcst. Standard library only: `runtime_check` and `report` share it.
Rule classes keep their examples as plain literals (see CONTRIBUTING.md), so this reads them
statically: every class with a `code = "TNL..."` attribute gives a `RuleInfo` with its code, name,
safety, default state, examples, good snippets and rationale (the SARIF reporter's help text). A
test asserts that this view equals the live registry's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

RULES_DIR = Path(__file__).resolve().parent / "rules"


@dataclass(frozen=True)
class ExampleInfo:
    bad: str
    lines: Tuple[int, ...]
    fixed: Optional[str] = None
    safety: Optional[str] = None  # "safe" / "unsafe" where the fix's differs from the rule's


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    safety: str  # "SAFE", "UNSAFE" or "GUIDE" (the member name of findings.Safety)
    default: bool
    examples: Tuple[ExampleInfo, ...]
    good: Tuple[str, ...]
    path: str
    line: int
    rationale: str = ""
    meta: bool = False  # about the linter's own comments: nothing to reproduce at runtime


class CatalogueError(ValueError):
    """A rule's examples are not the plain literals that runtime_check can read."""


_EXAMPLE_FIELDS = ("bad", "lines", "fixed", "safety")


def _example(node: ast.expr, where: str) -> ExampleInfo:
    if not (isinstance(node, ast.Call) and _callee(node.func) == "Example"):
        raise CatalogueError(f"{where}: examples must be Example(...) calls")
    values = {}
    try:
        for name, arg in zip(_EXAMPLE_FIELDS, node.args):
            values[name] = ast.literal_eval(arg)
        for kw in node.keywords:
            if kw.arg is None:
                raise CatalogueError(f"{where}: Example(**...) cannot be read statically")
            values[kw.arg] = ast.literal_eval(kw.value)
    except ValueError as exc:
        raise CatalogueError(f"{where}: Example arguments must be literals ({exc})") from None
    values["lines"] = tuple(values.get("lines", ()))
    return ExampleInfo(**values)


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _class_attrs(cls: ast.ClassDef) -> Dict[str, ast.expr]:
    attrs: Dict[str, ast.expr] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            attrs[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            attrs[stmt.target.id] = stmt.value
    return attrs


def _rules_in(path: Path) -> Dict[str, RuleInfo]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: Dict[str, RuleInfo] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        attrs = _class_attrs(cls)
        code_node = attrs.get("code")
        if not (isinstance(code_node, ast.Constant) and isinstance(code_node.value, str)):
            continue
        code = code_node.value
        if not code.startswith("TNL"):
            continue
        where = f"{path.name}:{cls.lineno} {cls.name}"
        safety_node = attrs.get("safety")
        if isinstance(safety_node, ast.Attribute):
            safety = safety_node.attr
        else:
            raise CatalogueError(f"{where}: safety must be Safety.<NAME>")
        examples_node = attrs.get("examples")
        if not isinstance(examples_node, (ast.Tuple, ast.List)):
            raise CatalogueError(f"{where}: examples must be a tuple of Example(...)")
        examples = tuple(_example(e, where) for e in examples_node.elts)
        good: Tuple[str, ...] = ()
        if "good" in attrs:
            try:
                good = tuple(ast.literal_eval(attrs["good"]))
            except ValueError:
                raise CatalogueError(f"{where}: good must be a tuple of string literals") from None
        default = True
        if "default" in attrs:
            default = bool(ast.literal_eval(attrs["default"]))
        name_node = attrs.get("name")
        name = name_node.value if isinstance(name_node, ast.Constant) and isinstance(name_node.value, str) else ""
        if code in found:
            raise CatalogueError(f"{where}: duplicate rule code {code}")
        rationale = ast.literal_eval(attrs["rationale"]) if "rationale" in attrs else ""
        meta = bool(ast.literal_eval(attrs["meta"])) if "meta" in attrs else False
        found[code] = RuleInfo(code, name, safety, default, examples, good, str(path), cls.lineno, rationale, meta)
    return found


def load(rules_dir: Optional[Path] = None) -> Dict[str, RuleInfo]:
    """Every rule defined in the rule modules, by code (sorted)."""
    rules: Dict[str, RuleInfo] = {}
    for path in sorted(Path(rules_dir or RULES_DIR).rglob("*.py")):
        for code, info in _rules_in(path).items():
            if code in rules:
                raise CatalogueError(f"duplicate rule code {code} in {path.name}")
            rules[code] = info
    return dict(sorted(rules.items()))
