"""The reproductions mirror the rules: the reproduction of the rule in `rules/<family>/<module>.py`
is `REPRO` in `runtime_check/repros/<family>/<module>.py`, and the package runs every one of them."""

from pathlib import Path
from types import ModuleType

import pytest

from torchnumlint import catalogue
from torchnumlint.runtime_check import repros
from torchnumlint.runtime_check.repros import MODULES, REPROS

RULES = {code: info for code, info in catalogue.load().items() if not info.meta}  # TNL900: nothing to reproduce
REPROS_DIR = Path(repros.__file__).resolve().parent
MODULE_OF = {module.REPRO.code: module for module in MODULES}


def _relative(path: str, root: Path) -> tuple:
    return Path(path).resolve().relative_to(root).with_suffix("").parts


@pytest.mark.parametrize("code", sorted(RULES))
def test_reproduction_mirrors_the_rule_module(code):
    assert code in MODULE_OF, f"{code} has no reproduction module"
    rule = _relative(RULES[code].path, catalogue.RULES_DIR.resolve())
    repro = _relative(MODULE_OF[code].__file__, REPROS_DIR)
    assert repro == rule, f"{code}: reproduction in repros/{'/'.join(repro)}.py, rule in rules/{'/'.join(rule)}.py"


@pytest.mark.parametrize("code", sorted(RULES))
def test_reproduction_module_is_named_by_the_rule(code):
    assert Path(MODULE_OF[code].__file__).stem == RULES[code].name.replace("-", "_")


def test_every_reproduction_module_is_registered():
    """Discovery finds every module under repros/<family>/ (one it missed would never run)."""
    on_disk = {p for p in REPROS_DIR.glob("*/*.py") if p.name != "__init__.py"}
    assert on_disk == {Path(m.__file__).resolve() for m in MODULES}
    assert set(REPROS) == set(MODULE_OF) and len(MODULE_OF) == len(MODULES)


def test_two_reproductions_of_one_code_are_refused():
    first = MODULES[0]
    twin = ModuleType("twin")
    twin.REPRO = first.REPRO
    with pytest.raises(RuntimeError, match=f"duplicate reproduction {first.REPRO.code} in twin"):
        repros.by_code([first, twin])
