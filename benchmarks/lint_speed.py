"""How fast is torchnumlint against parsing alone, on real PyTorch code, in one run.

    python benchmarks/lint_speed.py [FOLDER] [--limit N]

Default corpus: the installed torch package's own Python sources (thousands of real files). Prints
seconds and ratios against `ast.parse` of the same files, measured in the same run, plus a bare
LibCST parse, so the numbers stay comparable across machines.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from pathlib import Path


def corpus(folder: Path, limit: int):
    files = sorted(p for p in folder.rglob("*.py") if "test" not in p.parts)[:limit]
    texts = []
    for path in files:
        try:
            texts.append((str(path), path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            pass
    return texts


def timed(label, fn, texts):
    start = time.perf_counter()
    result = fn(texts)
    return label, time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?")
    parser.add_argument("--limit", type=int, default=1500)
    args = parser.parse_args()
    if args.folder:
        folder = Path(args.folder)
    else:
        import importlib.util

        folder = Path(importlib.util.find_spec("torch").origin).parent  # no import of torch itself
    texts = corpus(folder, args.limit)
    import libcst as cst

    from torchnumlint.engine import ParseError, lint_text
    from torchnumlint.index import build_index
    from torchnumlint.rules.base import all_rules

    rules = [r for r in all_rules() if r.default]

    def ast_parse(items):
        ok = 0
        for path, text in items:
            try:
                ast.parse(text)
                ok += 1
            except SyntaxError:
                pass
        return ok

    def cst_parse(items):
        for _, text in items:
            try:
                cst.parse_module(text)
            except Exception:
                pass
        return len(items)

    def lint(items):
        index = build_index(items)
        found = 0
        for path, text in items:
            try:
                found += len(lint_text(path, text, rules, index))
            except ParseError:
                pass
        return found

    rows = [timed("ast.parse (baseline)", ast_parse, texts), timed("libcst.parse_module", cst_parse, texts),
            timed("torchnumlint (all default rules)", lint, texts)]
    base = rows[0][1]
    print(f"corpus: {len(texts)} files, {sum(t.count(chr(10)) for _, t in texts)} lines from {folder}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, one process")
    for label, seconds, _ in rows:
        print(f"{label:<34} {seconds:8.2f} s   {seconds / base:6.1f} x baseline   {len(texts) / seconds:8.0f} files/s")
    print(f"findings: {rows[2][2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
