"""Which fixes a file's config offers, and at what safety: ruff's `fixable`, `unfixable`,
`extend-safe-fixes` and `extend-unsafe-fixes`, applied to findings as the rules made them.

Plain data (no libcst), so the run's options carry it to worker processes and the reporters see
findings whose fixes already say what `--fix` will do with them.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

from torchnumlint.findings import Finding, Safety


def _covers(selectors: Sequence[str], code: str) -> bool:
    return any(s == "ALL" or code.startswith(s) for s in selectors)


class FixPolicy(NamedTuple):
    """Selectors (codes or prefixes, `ALL`): `fixable` None means every code."""

    fixable: Optional[Tuple[str, ...]] = None
    unfixable: Tuple[str, ...] = ()
    safe: Tuple[str, ...] = ()  # extend-safe-fixes: their unsafe fixes count as safe
    unsafe: Tuple[str, ...] = ()  # extend-unsafe-fixes: their safe fixes count as unsafe

    def apply(self, findings: List[Finding]) -> List[Finding]:
        """`findings`, each fix dropped where its code is not fixable, its safety changed where
        the config says (a GUIDE has no edits and stays as it is)."""
        if self == FixPolicy():
            return findings
        return [self._one(finding) for finding in findings]

    def _one(self, finding: Finding) -> Finding:
        fix = finding.fix
        if fix is None or fix.safety is Safety.GUIDE:
            return finding
        if (self.fixable is not None and not _covers(self.fixable, finding.code)) or _covers(self.unfixable, finding.code):
            return finding.replace(fix=None)
        if fix.safety is Safety.UNSAFE and _covers(self.safe, finding.code):
            return finding.replace(fix=fix._replace(safety=Safety.SAFE))
        if fix.safety is Safety.SAFE and _covers(self.unsafe, finding.code):
            return finding.replace(fix=fix._replace(safety=Safety.UNSAFE))
        return finding
