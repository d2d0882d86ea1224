"""Reproductions of the cross_entropy rules (`torchnumlint/rules/cross_entropy/`), one module per rule."""
