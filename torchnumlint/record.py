"""The base of the plain-data classes a run builds at start-up (options, results, findings, a
file's config): equality, repr and `replace` from the class's list of fields.

Why not `dataclasses`: importing it imports `inspect` (and `dis`, `tokenize`, ...), and each class
it builds compiles its methods at import: thirteen of them on the path of `torchnumlint FILE` cost
13 ms of a 62 ms start-up (issue 22). Each class here writes its `__init__` (the one method whose
defaults differ), declares `__slots__` and `_fields`, and inherits the rest.
"""

from __future__ import annotations

from typing import Any, ClassVar, Tuple, TypeVar

_R = TypeVar("_R", bound="Record")


class Record:
    """Equal to another of its exact class whose compared fields are equal (a dataclass's
    `__eq__`); unhashable, as a mutable dataclass is (a class that defines `__eq__` and not
    `__hash__` gets `__hash__ = None`); `replace` is `dataclasses.replace`."""

    __slots__ = ()
    _fields: ClassVar[Tuple[str, ...]] = ()  # every field, in the order `__init__` takes them
    _hidden: ClassVar[Tuple[str, ...]] = ()  # fields neither compared nor shown (`field(compare=False, repr=False)`)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields if name not in self._hidden)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields if name not in self._hidden)
        return f"{type(self).__name__}({shown})"

    def replace(self: _R, **changes: Any) -> _R:
        """A copy with `changes` (field name -> value) made."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)
