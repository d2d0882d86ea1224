"""What a report format can carry: file names are bytes, reports are Unicode.

Why: a file name that is not UTF-8 reaches torchnumlint as a str holding lone surrogates (Python's
`surrogateescape`), which no UTF-8 encoder writes (SARIF and GitLab crashed with nothing written),
and a control character in a name is legal on disk but not in XML 1.0 (JUnit wrote a file no
parser reads). The machine formats pass what they write through here: such characters become
U+FFFD, the Unicode replacement character, and a URI keeps the name's exact bytes,
percent-encoded.
"""

from __future__ import annotations

import re
from urllib.parse import quote

_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # outside XML 1.0's Char
REPLACEMENT = "\ufffd"


def text(value: str) -> str:
    """`value` with what UTF-8 cannot encode replaced."""
    return _SURROGATE.sub(REPLACEMENT, value)


def xml(value: str) -> str:
    """`value` with what XML 1.0 cannot hold (control characters, lone surrogates) replaced."""
    return _NOT_XML.sub(REPLACEMENT, value)


def plain(tree: object) -> object:
    """A JSON tree with every string (keys included) passed through `text`."""
    if isinstance(tree, str):
        return text(tree)
    if isinstance(tree, dict):
        return {plain(key): plain(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [plain(item) for item in tree]
    return tree


def uri_path(path: str) -> str:
    """A relative path as a URI reference: its bytes (as the file system has them) percent-encoded."""
    return quote(name_bytes(path))


def name_bytes(value: str) -> bytes:
    """A name's bytes as on disk (a digest of them tells two undecodable names apart)."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte stands for
        return value.encode("utf-8", "surrogatepass")
