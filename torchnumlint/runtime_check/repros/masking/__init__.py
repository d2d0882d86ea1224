"""Reproductions of the masking rules (`torchnumlint/rules/masking/`), one module per rule."""
