"""Whether the file being linted is test code, for hazards that only training reaches.

Some hazards need a magnitude that a model reaches by training: a sigmoid that rounds to 1
(a logit above 16.6 in float32, TNL105), a softmax spread past ~104 (TNL103), an exp past 88.7
(TNL111). A test runs a model for a few steps from small random weights, on a toy dataset: a
reader who judged a test fixture's GAN (19 steps on 300 images, float32) found its discriminator
never near a logit of 16.6, and a maintainer mutes such a finding. So in test code these
magnitude claims are strict-mode only; hazards that every step reaches (a squeezed loss, a
deprecated API, an edge value of the data) are judged as anywhere else.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional

from torchnumlint.discovery import project_root

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

_TEST_FOLDERS = frozenset({"tests", "test", "testing", "unittests", "unit_tests"})

# What a finding left to strict mode by this says.
STRICT_IN_TESTS = "strict mode: test code, whose models train for a few steps, does not show that magnitude"


_ROOTS: Dict[Path, Optional[Path]] = {}  # folder -> its project root (`discovery.project_root`)


def in_test_code(ctx: "FileContext") -> bool:
    """Whether `ctx`'s file is a test module: named `test_*.py`, `*_test.py` or `conftest.py`
    (pytest's and unittest's conventions), or under a `tests`/`test` folder of its project (the
    folders above the project's root do not count: a clone kept in `~/test/` is no test)."""
    return ctx.per_file("test_code", lambda ctx: _is_test_path(Path(os.path.abspath(ctx.path))))


def _is_test_path(path: Path) -> bool:
    name = path.name
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    root = project_root(path.parent, _ROOTS)
    folders = path.parent.relative_to(root).parts if root is not None and path.is_relative_to(root) else ()
    return any(part in _TEST_FOLDERS for part in folders)
