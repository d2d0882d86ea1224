"""Reproductions of the linear-algebra rules (`rules/linalg/`)."""
