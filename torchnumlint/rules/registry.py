"""Every rule: importing this module imports each family package, whose rule classes register
themselves (`Rule.__init_subclass__`). A new family is added here.

This lives apart from `rules/__init__.py` so that importing one shared module (say the plain-data
AMP vocabulary, `rules/autocast.py`, which the `ast` index reads) loads no rule and no libcst.
"""

from __future__ import annotations

from typing import Dict, List, Type

from torchnumlint.rules import (  # noqa: F401
    cross_entropy,
    division,
    kl_div,
    log_domain,
    masking,
    mixed_precision,
    noqa,
    roots,
    selection,
    special_functions,
)
from torchnumlint.rules.base import Rule, registered


def registry() -> Dict[str, Type[Rule]]:
    """Every rule, by code."""
    return registered()


def all_rules() -> List[Type[Rule]]:
    return list(registered().values())
