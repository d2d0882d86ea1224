"""Reproductions of the mixed-precision rules (`torchnumlint/rules/mixed_precision/`), one module
per rule."""
