"""Rule families, one module each; importing this package registers every rule."""

from torchnumlint.rules import kl_div  # noqa: F401
from torchnumlint.rules import log_domain  # noqa: F401
from torchnumlint.rules import division  # noqa: F401
from torchnumlint.rules import mixed_precision  # noqa: F401
from torchnumlint.rules import roots  # noqa: F401
