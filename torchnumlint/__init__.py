"""torchnumlint: find and fix numerically unsafe PyTorch code before the run.

Importing the package is cheap on purpose: libcst is loaded only by the linter proper
(`torchnumlint.engine`), torch only by `torchnumlint.runtime_check`, so the runtime side
works on a machine that has torch alone.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
