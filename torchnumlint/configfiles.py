"""Config files, read for a project's facts and never linted.

Hydra builds the classes its YAML configs name (`_target_: pkg.models.Net`), so a class is reached
from an fp16 region through `instantiate(cfg.model)` only when a config of the project names it
(`index.py`). The walk that finds the files to lint collects these files on the way
(`discovery.py`); this module says which they are and what they state.
"""

from __future__ import annotations

import re
from typing import Tuple

SUFFIXES = (".yaml", ".yml")
# compiled by its first use (`re`'s own cache), not by every start-up that imports `SUFFIXES`
_TARGET = r"""^\s*-?\s*_target_\s*:\s*["']?([A-Za-z_][\w.]*)["']?\s*(?:#.*)?$"""


def is_config(path: str) -> bool:
    return path.endswith(SUFFIXES)


def hydra_targets(text: str) -> Tuple[str, ...]:
    """The dotted names a config file gives as `_target_` (YAML `_target_: pkg.mod.Class`, quoted or
    not), in order; the file is read as text, not as YAML (no dependency, and interpolations such as
    `${model}` are not names)."""
    return tuple(dict.fromkeys(m.group(1) for m in re.finditer(_TARGET, text, re.M)))
