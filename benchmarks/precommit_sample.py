"""The pre-commit case over a sample of files: each of N random files that import torch is changed
(a comment appended) and linted alone, as pre-commit runs it, by this checkout and by a baseline,
alternately, each in its own warm copy of the project.

    python benchmarks/precommit_sample.py THIS_COPY BASE_COPY --baseline CHECKOUT [-n 10] [--seed S] [--repeat 3]

Why beside `one_file.py`: one file says little about the pre-commit case, whose cost depends on
the file (its size, how many files call its functions, whether its facts moved); the median over
a random sample is what a user meets. THIS_COPY and BASE_COPY are two copies of the same project,
each warmed by one whole run of its side (the cache is keyed by the linter's code, so the two sides
cannot share one). Each file gets a fresh comment before every run, so its lint entry misses; the
file is restored after each run. The time is the CPU of the whole process tree (the workers
included), which the load of a shared machine moves less than the wall time. Printed: each file's
median per side, the medians over the files, the median of the per-file ratios, and the load.
Times belong here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
from typing import Dict, List, Optional


def _sample(root: str, count: int, seed: int) -> List[str]:
    """`count` random files of `root` (relative paths) whose text imports torch."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    if "import torch" in handle.read():
                        found.append(os.path.relpath(path, root))
    random.Random(seed).shuffle(found)
    return found[:count]


def _cpu_of_run(root: str, checkout: Optional[str], relative: str, salt: random.Random) -> float:
    """CPU seconds of `torchnumlint FILE` run in `root` after a fresh comment is appended to it."""
    env: Dict[str, str] = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    if checkout is not None:
        env["PYTHONPATH"] = checkout
    path = os.path.join(root, relative)
    with open(path, "rb") as handle:
        original = handle.read()
    try:
        with open(path, "ab") as handle:
            handle.write(b"\n# edited %d\n" % salt.randrange(10**12))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        command = [sys.executable, "-m", "torchnumlint", "--exit-zero", "-q", relative]
        subprocess.run(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        with open(path, "wb") as handle:
            handle.write(original)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("this_copy", help="a warm copy of the project for this checkout")
    parser.add_argument("base_copy", help="a warm copy of the same project for the baseline")
    parser.add_argument("--baseline", required=True, help="the baseline checkout, put first on PYTHONPATH")
    parser.add_argument("-n", type=int, default=10, help="how many files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per file and side")
    args = parser.parse_args()
    this = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    salt = random.Random()  # not the sample's seed: a second run's comments would be the first's, its entries hits
    print(f"load average {os.getloadavg()[0]:.2f} before")
    print(f"{'this':>7} {'base':>7}  bytes  file (median CPU seconds of {args.repeat} alternating runs)")
    ours: List[float] = []
    theirs: List[float] = []
    for relative in _sample(args.this_copy, args.n, args.seed):
        mine: List[float] = []
        base: List[float] = []
        for _ in range(args.repeat):
            mine.append(_cpu_of_run(args.this_copy, this, relative, salt))
            base.append(_cpu_of_run(args.base_copy, args.baseline, relative, salt))
        ours.append(statistics.median(mine))
        theirs.append(statistics.median(base))
        size = os.path.getsize(os.path.join(args.this_copy, relative))
        print(f"{ours[-1]:7.3f} {theirs[-1]:7.3f} {size:7d}  {relative}", flush=True)
    if ours:
        ratio = statistics.median(mine / base for mine, base in zip(ours, theirs))
        print(
            f"median over files: this {statistics.median(ours):.3f} s, baseline {statistics.median(theirs):.3f} s; per-file ratio this/baseline {ratio:.2f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
