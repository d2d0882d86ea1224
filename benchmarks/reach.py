"""How much code reaches LibCST, and which rules' candidate tests keep it there.

    python benchmarks/reach.py [FOLDER ...] [--every N] [--per-rule]

For each FOLDER (default: the installed torch package's sources), every N-th `.py` file (sorted by
path) goes through what the engine does before LibCST: the syntax check, `engine.candidate_rules`
(the rules' text pre-filter on the whole file) and `candidates.unneeded` (the statements no rule
can fire in, masked), with the default rules and no project facts. It prints how many files and
bytes LibCST is given, and the time of the pre-pass against `ast.parse` of the same files.

With --per-rule it also prints, for each rule, the bytes it keeps among others (LibCST would
parse them were it the only rule) and alone (they would be masked without it: what cutting that
rule's test can gain). A byte's share is counted on the masked text, so "alone" over all rules
sums to less than the total (bytes two rules keep are no one rule's alone).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Type

from torchnumlint import candidates, prepass
from torchnumlint.engine import candidate_rules
from torchnumlint.rules.base import Rule
from torchnumlint.rules.registry import registry


def files_of(folder: Path, every: int) -> List[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.is_file() and "__pycache__" not in p.parts)[::every]


def parsed_bytes(text: str, tree: ast.Module, rules: Sequence[Type[Rule]]) -> int:
    """The characters LibCST is given (0 where it does not parse the file)."""
    active = candidate_rules(text, rules)
    masked = candidates.unneeded(text, tree, prepass.Lines(text), active) if active else None
    return 0 if masked is None else len(text) - sum(end - start for start, end in masked)


class Reach:
    """Files and characters of one folder: read, and given to LibCST; per rule where asked."""

    def __init__(self) -> None:
        self.files = self.reached = self.size = self.parsed = 0
        self.ast_seconds = self.prepass_seconds = 0.0
        self.among: Dict[str, int] = {}
        self.alone: Dict[str, int] = {}

    def add(self, text: str, rules: Sequence[Type[Rule]], per_rule: bool) -> None:
        start = time.perf_counter()
        try:
            ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return
        self.ast_seconds += time.perf_counter() - start
        start = time.perf_counter()
        tree = prepass.check_syntax(text, "<benchmark>")
        parsed = parsed_bytes(text, tree, rules)
        self.prepass_seconds += time.perf_counter() - start
        self.files += 1
        self.size += len(text)
        self.reached += parsed > 0
        self.parsed += parsed
        if per_rule and parsed:
            for rule in rules:
                self.among[rule.code] = self.among.get(rule.code, 0) + parsed_bytes(text, tree, [rule])
                others = [r for r in rules if r is not rule]
                self.alone[rule.code] = self.alone.get(rule.code, 0) + parsed - parsed_bytes(text, tree, others)

    def summary(self) -> str:
        return (
            f"{self.reached} of {self.files} files ({self.reached / max(self.files, 1):.0%}), "
            f"{self.parsed / 1e6:.2f} of {self.size / 1e6:.2f} MB ({self.parsed / max(self.size, 1):.0%}) reach LibCST; "
            f"syntax check + pre-filter + masking {self.prepass_seconds:.2f} s = "
            f"{self.prepass_seconds / max(self.ast_seconds, 1e-9):.2f}x ast.parse ({self.ast_seconds:.2f} s)"
        )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*")
    parser.add_argument("--every", type=int, default=1, help="every N-th file (sorted by path)")
    parser.add_argument("--per-rule", action="store_true", help="bytes each rule keeps, among others and alone")
    args = parser.parse_args(argv)
    spec = importlib.util.find_spec("torch")
    folders = [Path(f) for f in args.folders] or ([Path(spec.origin).parent] if spec and spec.origin else [])
    rules = [rule for rule in registry().values() if rule.default]
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    rows: List[Tuple[str, Reach]] = []
    for folder in folders:
        reach = Reach()
        for path in files_of(folder, args.every):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            with prepass.recursion_limit():
                reach.add(text, rules, args.per_rule)
        rows.append((str(folder), reach))
        print(f"{folder}: {reach.summary()}", flush=True)
        if args.per_rule:
            print(f"  {'rule':<8} {'among MB':>9} {'alone MB':>9}")
            for code in sorted(reach.among, key=lambda c: -reach.alone[c] - reach.among[c] / 1e3):
                print(f"  {code:<8} {reach.among[code] / 1e6:9.2f} {reach.alone[code] / 1e6:9.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
