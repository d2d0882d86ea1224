"""`--fix --unsafe-fixes` at scale, on a copy of a real tree: what must hold, checked.

    python tools/fix_at_scale.py TREE [--jobs N]

The tree's `.py` files are copied to a temporary folder, linted (JSON) to learn which files have
a fixable finding, fixed, then fixed again. It holds when every rewritten file parses, the second
run changes nothing, every file without a fixable finding is byte-identical, and no file gives an
internal error. Prints one line of counts and each problem; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class Report:
    files: int = 0
    fixable: int = 0
    rewritten: int = 0
    problems: List[str] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.files} files, {self.fixable} with a fixable finding, {self.rewritten} rewritten, {len(self.problems)} problems"


def _copy_sources(tree: str, into: str) -> None:
    for folder, _, names in os.walk(tree):
        for name in names:
            if name.endswith(".py"):
                source = os.path.join(folder, name)
                target = os.path.join(into, os.path.relpath(source, tree))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(source, target)


def _snapshot(folder: str) -> Dict[str, bytes]:
    out = {}
    for top, _, names in os.walk(folder):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, folder)] = handle.read()
    return out


def _cli(folder: str, jobs: Optional[int], *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torchnumlint", "--no-cache", "--unsafe-fixes", "--exit-zero", *args]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    return subprocess.run(command + [folder], capture_output=True, text=True, cwd=folder)


def _parses(data: bytes) -> bool:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 30_000))  # a file may hold a deep (skipped) statement
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
        return True
    except (SyntaxError, ValueError, RecursionError):
        return False
    finally:
        sys.setrecursionlimit(limit)


def check(tree: str, jobs: Optional[int] = None) -> Report:
    report = Report()
    with tempfile.TemporaryDirectory(prefix="fix-at-scale-") as work:
        _copy_sources(tree, work)
        before = _snapshot(work)
        report.files = len(before)
        linted = _cli(work, jobs, "--output-format", "json")
        fixable = {os.path.relpath(f["filename"], work) for f in json.loads(linted.stdout or "[]") if f.get("fix")}
        report.fixable = len(fixable)
        first = _cli(work, jobs, "--fix")
        after = _snapshot(work)
        second = _cli(work, jobs, "--fix")
        again = _snapshot(work)
        for run in (linted, first, second):
            report.problems += [line for line in run.stdout.splitlines() + run.stderr.splitlines() if "internal error" in line]
        for path, data in after.items():
            if data == before.get(path):
                continue
            report.rewritten += 1
            if path not in fixable:
                report.problems.append(f"{path}: rewritten without a fixable finding")
            if _parses(before[path]) and not _parses(data):
                report.problems.append(f"{path}: does not parse after the fix")
        report.problems += [f"{path}: changed by a second --fix" for path, data in again.items() if data != after[path]]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("--jobs", type=int)
    options = parser.parse_args()
    report = check(options.tree, options.jobs)
    print(report.line())
    for problem in report.problems:
        print(problem)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
