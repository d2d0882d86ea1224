"""Reproductions of the selection rules (`torchnumlint/rules/selection/`), one module per rule."""
