"""Every rule: importing this module imports every module of every family package under
`torchnumlint/rules/` (as Fixit walks its rules package), and the rule classes register themselves
(`Rule.__init_subclass__`). Nothing is listed by hand: a rule module dropped into a family, or a
new family package, is found.

This lives apart from `rules/__init__.py` so that importing one shared module (say the plain-data
AMP vocabulary, `rules/autocast.py`, which the `ast` index reads) loads no rule and no libcst. The
shared matchers (the plain modules of `rules/`) are not walked: a rule imports what it asks.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Dict, List, Type

from torchnumlint import rules as _rules_package
from torchnumlint.rules.base import Rule, registered


def _import_families() -> None:
    """Import each family package (a package directly under `rules/`) and every module in it."""
    for family in pkgutil.iter_modules(_rules_package.__path__, _rules_package.__name__ + "."):
        if not family.ispkg:
            continue
        package = importlib.import_module(family.name)
        for module in pkgutil.walk_packages(package.__path__, family.name + "."):
            importlib.import_module(module.name)


_import_families()


def registry() -> Dict[str, Type[Rule]]:
    """Every rule, by code."""
    return registered()


def all_rules() -> List[Type[Rule]]:
    return list(registered().values())
