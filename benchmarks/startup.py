"""Start-up: the wall time of `torchnumlint` on one empty file, the median of repeated runs.

    python benchmarks/startup.py [--runs N] [--variant LABEL:PYTHON[:PYTHONPATH]]...

Why: a pre-commit hook or an editor's save runs the linter on one file again and again; the
issue's target is 0.05 s (ruff takes 0.006 s). Each run is a fresh process in a fresh temporary
folder (a project of one empty file, the cache on), timed from outside as hyperfine does; the
median of `--runs` (default 20) is printed, with the import breakdown one `python -X importtime`
run gives (the ten slowest modules, cumulative). Bytecode is written and read as an installed
package's is (into a temporary `PYTHONPYCACHEPREFIX`, after one warm-up run), even where the
environment sets `PYTHONDONTWRITEBYTECODE`: compiling every module at each start is no user's cost.

On a shared machine a time alone says little: the runs are interleaved (one of each per round)
with `python -c pass` of each interpreter and with each `--variant` (another interpreter: a
regular `pip install .` next to this editable one; or another checkout put first on `PYTHONPATH`:
main), and each is also given as the median of its per-round ratio to this checkout's run and of
its per-round excess over its own interpreter's `python -c pass` (an editable install's import
finder is loaded by `site`, so it is part of that interpreter's `-c pass` too), which the load
moves less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple


def _variant(text: str) -> Tuple[str, List[str], Dict[str, str]]:
    """`LABEL:PYTHON[:PYTHONPATH]` -> (label, the command, extra environment)."""
    label, python, *path = text.split(":")
    return label, [python, "-m", "torchnumlint", "empty.py"], {"PYTHONPATH": path[0]} if path else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--variant", action="append", default=[], help="LABEL:PYTHON[:PYTHONPATH], run interleaved with this one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tnl-startup-") as tmp:
        (Path(tmp) / "empty.py").write_text("")
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        argv = [sys.executable, "-m", "torchnumlint", "empty.py"]
        cases = [("this checkout", argv, {})] + [_variant(text) for text in args.variant]
        pythons = list(dict.fromkeys(command[0] for _, command, _ in cases))
        bare = {python: f"python -c pass ({python})" for python in pythons}
        cases += [(bare[python], [python, "-c", "pass"], {}) for python in pythons]
        for _, command, extra in cases:  # writes the bytecode (and each variant's cache entry)
            subprocess.run(command, cwd=tmp, env={**env, **extra}, check=True, stdout=subprocess.DEVNULL)
        times: Dict[str, List[float]] = {label: [] for label, _, _ in cases}
        for _ in range(args.runs):
            for label, command, extra in cases:
                start = time.perf_counter()
                subprocess.run(command, cwd=tmp, env={**env, **extra}, check=True, stdout=subprocess.DEVNULL)
                times[label].append(time.perf_counter() - start)
        out = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], cwd=tmp, env=env, capture_output=True, text=True)
        rows = [line.split("|") for line in out.stderr.splitlines() if line.startswith("import time:") and "cumulative" not in line]
        slowest = sorted(rows, key=lambda row: -int(row[1]))[:10]
        ours = times["this checkout"]
        print(f"load average {os.getloadavg()[0]:.2f} (1 min), {args.runs} interleaved rounds")
        print(f"torchnumlint on one empty file: median {statistics.median(ours):.3f} s of {args.runs} (min {min(ours):.3f} s)")
        for label, command, _ in cases:
            ratio = statistics.median(other / mine for other, mine in zip(times[label], ours))
            line = f"{label}: median {statistics.median(times[label]):.3f} s (min {min(times[label]):.3f} s), {ratio:.2f}x this checkout"
            if label not in bare.values():
                base = times[bare[command[0]]]
                over = statistics.median(mine - other for mine, other in zip(times[label], base))
                line += f"; over its python -c pass: median {over * 1000:.0f} ms, {statistics.median(m / o for m, o in zip(times[label], base)):.2f}x"
            print(line)
        for row in slowest:
            print(f"  {int(row[1]) / 1000:7.1f} ms cumulative  {row[2].rstrip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
