"""Reproductions of the division rules (`torchnumlint/rules/division/`), one module per rule."""
