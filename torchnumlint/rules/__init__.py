"""Rule families, one module each; importing this package registers every rule."""

from torchnumlint.rules import kl_div  # noqa: F401
