"""The project pre-pass: facts that cross file boundaries (filled in by the mixed-precision rules)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProjectIndex:
    @classmethod
    def empty(cls) -> "ProjectIndex":
        return cls()
