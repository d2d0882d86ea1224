"""Runtime side of torchnumlint: prove the rules on a device, and find NaNs in training runs.

- `verify(select=None, device="auto", dtypes=None)`: lint every rule's examples, apply the
  linter's own fixes, and run each reproduced example and its fix against the rule's float64
  mathematics; a verdict per rule x example x device x dtype. The command line is
  `python -m torchnumlint.runtime_check` (and `torchnumlint verify`).
- `nan_watch(model, mode="raise", every=1, scaler=None, scope="modules")`: hooks that catch the
  first NaN/Inf in the data, the forward, the backward and the parameter gradients (and gradient
  spikes before it), and say which module made it (`watch.py`).

Imports torch and the standard library only (never libcst or click); torch itself is imported on
first use of an attribute, so `import torchnumlint.runtime_check` stays cheap. `verify` reaches the
linter (libcst) when it runs, to make the fixes (`linted.py`).
"""

from typing import TYPE_CHECKING

__all__ = ["nan_watch", "NanWatch", "NonFiniteError", "NonFiniteWarning", "NanReport", "verify", "main"]

_LAZY = {
    "nan_watch": "torchnumlint.runtime_check.watch",
    "NanWatch": "torchnumlint.runtime_check.watch",
    "NonFiniteError": "torchnumlint.runtime_check.watch",
    "NonFiniteWarning": "torchnumlint.runtime_check.watch",
    "NanReport": "torchnumlint.runtime_check.watch",
    "verify": "torchnumlint.runtime_check.runner",
    "main": "torchnumlint.runtime_check.cli",
}

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.runtime_check.cli import main
    from torchnumlint.runtime_check.runner import verify
    from torchnumlint.runtime_check.watch import NanReport, NanWatch, NonFiniteError, NonFiniteWarning, nan_watch


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
