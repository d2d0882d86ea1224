"""Reproductions of the inverse-trigonometric rules (`rules/inverse_trig/`)."""
