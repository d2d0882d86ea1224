"""Do the workers scale? Cold runs with `-j 1` and `-j N`, interleaved, as a ratio per round.

    python benchmarks/jobs_scaling.py FOLDER [--rounds R] [--jobs N] [--checkout LABEL:PATH]...

Why: the issue's target is a cold `-j 2` run in at most 0.6x the time of `-j 1`. On a machine
shared with others a time measured alone says little: each round runs every command once, one
after the other (a fresh cache folder each: cold), and the ratio of `-j N` to `-j 1` is taken
within the round, then its median over the rounds. `--checkout` adds another checkout of
torchnumlint (put first on PYTHONPATH: main, say), measured in the same rounds. Each run's CPU
time (the process and its workers, from `wait4`) is printed too: a ratio of wall times near 1
with CPU times alike means the workers had no free core, not that the run is serial. Bytecode
is written and read as an installed package's is (see startup.py). FOLDER is linted in place
(it is only read; the cache goes to a temporary folder).
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


def _run(argv: List[str], cwd: Path, env: Dict[str, str]) -> Tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for the CPU time of the tree
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--checkout", action="append", default=[], help="LABEL:PATH of another torchnumlint checkout")
    args = parser.parse_args()
    folder = Path(args.folder).resolve()
    with tempfile.TemporaryDirectory(prefix="tnl-scaling-") as tmp:
        base = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        base["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        checkouts = [("this checkout", base)] + [
            (label, {**base, "PYTHONPATH": path}) for label, path in (text.split(":", 1) for text in args.checkout)
        ]
        argv = [sys.executable, "-m", "torchnumlint", "-q", "--exit-zero"]
        for _, env in checkouts:  # writes the bytecode
            subprocess.run(argv + ["--version"], env=env, check=True, stdout=subprocess.DEVNULL)
        times: Dict[Tuple[str, int], List[Tuple[float, float]]] = {}
        for round_ in range(args.rounds):
            for label, env in checkouts:
                for jobs in (1, args.jobs):
                    cache = str(Path(tmp) / f"cache-{round_}-{label}-{jobs}")
                    times.setdefault((label, jobs), []).append(_run(argv + ["-j", str(jobs), "--cache-dir", cache, "."], folder, env))
        files = sum(1 for _ in folder.rglob("*.py"))
        print(f"{folder.name}: {files} .py files, {args.rounds} interleaved rounds, load average {os.getloadavg()[0]:.2f} at the end")
        for label, _ in checkouts:
            one, many = times[(label, 1)], times[(label, args.jobs)]
            ratios = [m[0] / o[0] for o, m in zip(one, many)]
            print(
                f"  {label}: -j 1 median {statistics.median(w for w, _ in one):.2f} s (CPU {statistics.median(c for _, c in one):.2f} s), "
                f"-j {args.jobs} median {statistics.median(w for w, _ in many):.2f} s (CPU {statistics.median(c for _, c in many):.2f} s); "
                f"-j {args.jobs} / -j 1 per round: {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
