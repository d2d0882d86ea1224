"""Reproductions of the special_functions rules (`torchnumlint/rules/special_functions/`), one module per rule."""
