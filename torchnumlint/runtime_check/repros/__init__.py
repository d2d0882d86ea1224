"""The reproductions of each rule's examples, on a real device.

The layout mirrors the rules': the reproduction of the rule in `rules/<family>/<rule_name>.py` is
`REPRO`, a `context.Repro` of its first example, in `repros/<family>/<rule_name>.py`, beside its
input builders, the measured thresholds they sit at and the float64 mathematics the fix is judged
against; a module reproduces further examples in `FURTHER` (a tuple of `Repro`, each naming its
`example`). Input builders that several reproductions share are in
`inputs.py`. This package walks its family packages (a package directly under `repros/`, as
`rules/registry.py` walks the rules) and gathers every module's reproductions into `REPROS`;
every module of a family package is a reproduction and must define `REPRO`. The rule modules never
import this package back, so the registry is complete once it is imported, whichever module is
imported first.

Adding a rule: write `repros/<family>/<rule_name>.py` defining `REPRO` (nothing to list:
`tests/runtime_check/test_repros.py` checks that it mirrors the rule), then run
`python -m torchnumlint.runtime_check --select TNLxxx --device cpu`.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Dict, List, Sequence, Tuple

from torchnumlint.runtime_check.context import Repro


def discover() -> List[ModuleType]:
    """Every module of every family package under `repros/`, sorted by name; a module without a
    `REPRO` is an error (it would never run)."""
    modules: List[ModuleType] = []
    for family in pkgutil.iter_modules(__path__, __name__ + "."):
        if not family.ispkg:
            continue
        package = importlib.import_module(family.name)
        for info in pkgutil.iter_modules(package.__path__, family.name + "."):
            module = importlib.import_module(info.name)
            if not isinstance(getattr(module, "REPRO", None), Repro):
                raise RuntimeError(f"{info.name} defines no REPRO")
            modules.append(module)
    return sorted(modules, key=lambda m: m.__name__)


MODULES: Sequence[ModuleType] = tuple(discover())


def by_code(modules: Sequence[ModuleType]) -> Dict[str, Tuple[Repro, ...]]:
    """The reproductions of each module (`REPRO`, then `FURTHER`), by rule code; two modules of
    one code, or two reproductions of one example, are an error."""
    repros: Dict[str, Tuple[Repro, ...]] = {}
    for module in modules:
        code = module.REPRO.code
        if code in repros:
            raise RuntimeError(f"duplicate reproduction {code} in {module.__name__}")
        found = (module.REPRO,) + tuple(getattr(module, "FURTHER", ()))
        examples = [r.example for r in found]
        if len(set(examples)) != len(examples) or any(r.code != code for r in found):
            raise RuntimeError(f"{module.__name__}: one reproduction per example of {code}")
        repros[code] = found
    return repros


REPROS: Dict[str, Tuple[Repro, ...]] = by_code(MODULES)
