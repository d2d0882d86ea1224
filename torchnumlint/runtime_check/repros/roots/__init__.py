"""Reproductions of the root rules (`torchnumlint/rules/roots/`), one module per rule."""
