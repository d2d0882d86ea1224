"""Reproductions of the kl_div rules (`torchnumlint/rules/kl_div/`), one module per rule."""
