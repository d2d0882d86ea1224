"""Start-up: the wall time of `torchnumlint` on one empty file, the median of repeated runs.

    python benchmarks/startup.py [--runs N]

Why: a pre-commit hook or an editor's save runs the linter on one file again and again; the
issue's target is 0.05 s (ruff takes 0.006 s). Each run is a fresh process in a fresh temporary
folder (a project of one empty file, the cache on), timed from outside as hyperfine does; the
median of `--runs` (default 20) is printed, with the import breakdown one `python -X importtime`
run gives (the ten slowest modules, cumulative). Bytecode is written and read as an installed
package's is (into a temporary `PYTHONPYCACHEPREFIX`, after one warm-up run), even where the
environment sets `PYTHONDONTWRITEBYTECODE`: compiling every module at each start is no user's cost.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tnl-startup-") as tmp:
        (Path(tmp) / "empty.py").write_text("")
        argv = [sys.executable, "-m", "torchnumlint", "empty.py"]
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        subprocess.run(argv, cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL)  # writes the bytecode
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(argv, cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        bare = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], cwd=tmp, env=env, check=True)
            bare.append(time.perf_counter() - start)
        out = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], cwd=tmp, env=env, capture_output=True, text=True)
        rows = [line.split("|") for line in out.stderr.splitlines() if line.startswith("import time:") and "cumulative" not in line]
        slowest = sorted(rows, key=lambda row: -int(row[1]))[:10]
        print(f"torchnumlint on one empty file: median {statistics.median(times):.3f} s of {args.runs} (min {min(times):.3f} s)")
        print(f"python -c pass: median {statistics.median(bare):.3f} s (the interpreter's own start)")
        for row in slowest:
            print(f"  {int(row[1]) / 1000:7.1f} ms cumulative  {row[2].rstrip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
