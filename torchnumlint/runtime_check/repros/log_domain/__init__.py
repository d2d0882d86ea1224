"""Reproductions of the log-domain rules (`torchnumlint/rules/log_domain/`), one module per rule."""
