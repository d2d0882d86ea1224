"""The pre-commit case, side by side: one changed file passed alone (relative to the project's
root, as pre-commit passes it) with a warm cache, this checkout against another one.

    python benchmarks/one_file.py FOLDER --baseline CHECKOUT [--repeat N] [--file REL] [--edit append|top]

FOLDER is copied to a temporary folder (given a `setup.py` when it has no project marker, so that
it is one project). Each side gets its own cache folder, warmed by one run over the file (which
stores every file's project facts and the manifest; the other files' lint entries play no part
in a one-file run). Then, N times, the file is edited (so its lint entry misses and it is linted
again, with the project's facts) and each side runs once, the side that goes first
alternating (the machine may be shared). Each side runs as `python -m torchnumlint` with its
checkout first on PYTHONPATH (`--this`: a copy, so that editing this one does not change the
package's fingerprint, and so its cache, halfway). Printed: each side's wall times, their medians, the median of the
per-repetition ratios, and the load average before and after. Times belong here, never in tests.

The edit (`--edit`): `append`, a comment appended at the end (no line of the file moves: its facts
keep their positions); `top`, a comment line inserted at the top (every line of the file moves, and
with it each class, function and fp16 region the project's facts hold of it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def timed(command: List[str], cwd: Path, env: Dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def first_torch_file(work: Path) -> Path:
    """What `benchmarks/speed.py` changes: the first file (by path) that imports torch."""
    files = sorted(p for p in work.rglob("*.py") if p.is_file())
    return next((p for p in files if "import torch" in p.read_text(encoding="utf-8", errors="replace")), files[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--baseline", required=True, help="a checkout of torchnumlint to compare with")
    parser.add_argument("--this", default=str(Path(__file__).resolve().parents[1]), help="the checkout measured (default: this one)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--file", help="the file to change, relative to FOLDER (default: the first that imports torch)")
    parser.add_argument("--edit", choices=("append", "top"), default="append", help="a comment appended, or a line at the top")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tnl-one-file-") as tmp:
        work = Path(tmp) / "project"
        shutil.copytree(args.folder, work, ignore=shutil.ignore_patterns(".torchnumlint_cache"))
        if not any((work / marker).exists() for marker in MARKERS):
            (work / "setup.py").write_text("")
        changed: Path = work / args.file if args.file else first_torch_file(work)
        rel = str(changed.relative_to(work))
        sides = {
            "this": (args.this, Path(tmp) / "cache-this"),
            "baseline": (args.baseline, Path(tmp) / "cache-baseline"),
        }
        envs = {name: {**os.environ, "PYTHONPATH": checkout} for name, (checkout, _) in sides.items()}
        commands = {
            name: [sys.executable, "-m", "torchnumlint", "-q", "--cache-dir", str(cache), rel] for name, (_, cache) in sides.items()
        }
        print(f"{work.name}: {sum(1 for _ in work.rglob('*.py'))} .py files; the changed file: {rel}; edit: {args.edit}")
        time.sleep(2.1)  # past the manifest's racy window for the copied files
        for name in sides:
            print(f"warming {name}: {timed(commands[name], work, envs[name]):.2f} s", flush=True)
        print(f"load average {os.getloadavg()[0]:.2f} before")
        times: Dict[str, List[float]] = {name: [] for name in sides}
        ratios: List[float] = []
        order = list(sides)
        for repetition in range(args.repeat):
            text = changed.read_text(encoding="utf-8")
            note = f"# changed {repetition}\n"
            changed.write_text(note + text if args.edit == "top" else text + "\n" + note, encoding="utf-8")
            now: Dict[str, Optional[float]] = {}
            for name in order if repetition % 2 == 0 else reversed(order):
                now[name] = timed(commands[name], work, envs[name])
                times[name].append(now[name])  # type: ignore[arg-type]
            ratios.append(times["this"][-1] / times["baseline"][-1])
            print(f"  {repetition}: this {times['this'][-1]:.3f} s, baseline {times['baseline'][-1]:.3f} s", flush=True)
        for name in sides:
            print(f"{name}: median {statistics.median(times[name]):.3f} s of {[round(t, 3) for t in times[name]]}")
        print(f"this / baseline: median ratio {statistics.median(ratios):.3f}")
        print(f"load average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
