"""torchnumlint's speed as a user meets it, against parsing alone and against TorchFix, in one run.

    python benchmarks/speed.py [FOLDER] [--limit N] [--jobs N] [--skip NAME,...]

FOLDER (default: the installed torch package's own sources) is copied to a temporary folder, so
that the cache lives there and one file can be changed; a folder without a project marker gets a
`setup.py`, so that it is one project (with project facts). Each measurement runs the real
command line in a fresh process and reports its wall time, files/s, the ratio to a one-core
`ast.parse` of the same files (measured in the same run) and the peak memory of the whole process
tree (the sum over the process and its workers, sampled every 20 ms: RSS, and PSS, which counts
pages shared between forked workers once), and its CPU time (user and system, workers included:
on a shared machine the steadier measure of work than wall time).

Measurements (names for --skip): ast (ast.parse, one core), libcst (a bare parse_module, one
core), cold-1 (empty cache, -j 1), cold (empty cache, all jobs), warm (nothing changed), comment, helper (the
whole project again after an edit to one file: a comment, then a helper returning a softmax),
one-file (one changed file passed alone, as pre-commit does: project facts included), torchfix (when
installed, all jobs), version (`torchnumlint --version`), reach (how many files, and how many of
their bytes, LibCST is given: the engine's own pre-filter, `engine.candidate_rules` and
`candidates.unneeded`, with the default rules and no project facts).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Edits to one file, each followed by a run over the whole project with the cache: one that
# changes no project fact, and one that adds a fact no other file names (a helper returning a
# softmax): each should re-lint that file alone (`fact_reads.py`), so compare with one-file.
EDITS = (
    ("comment", "an appended comment", "\n# an appended comment\n"),
    ("helper", "an added helper", "\n\ndef tnl_bench_probs(x):\n    return x.softmax(-1)\n"),
)


def copy_corpus(folder: Path, target: Path, limit: Optional[int]) -> List[Path]:
    files = sorted(p for p in folder.rglob("*.py") if p.is_file() and "__pycache__" not in p.parts)[:limit]
    for path in files:
        dest = target / path.relative_to(folder)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    for marker in MARKERS:  # the folder's own project markers, so its projects stay as they are
        for found in folder.rglob(marker) if marker != ".git" else ():
            dest = target / found.relative_to(folder)
            if dest.parent.exists() and found.is_file() and not dest.exists():
                shutil.copyfile(found, dest)
    if not any((target / m).exists() for m in MARKERS):
        (target / "setup.py").write_text("")
    return [target / p.relative_to(folder) for p in files]


class TreeMemory:
    """Peak RSS and PSS (MB) of a process and its descendants, sampled while it runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rss = self.pss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _tree(self) -> List[int]:
        children: Dict[int, List[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as handle:
                        ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        tree, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, ()))
        return tree

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss = pss = 0
            for pid in self._tree():
                try:
                    with open(f"/proc/{pid}/smaps_rollup") as handle:
                        for line in handle:
                            if line.startswith("Rss:"):
                                rss += int(line.split()[1])
                            elif line.startswith("Pss:"):
                                pss += int(line.split()[1])
                except OSError:
                    continue
            self.rss, self.pss = max(self.rss, rss / 1024), max(self.pss, pss / 1024)
            time.sleep(0.02)

    def stop(self) -> Tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.rss, self.pss


Measured = Tuple[float, float, float, int, float]  # seconds, peak RSS MB, peak PSS MB, exit code, CPU seconds


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's descendants that have ended: a command
    and the workers it waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def command(argv: List[str], cwd: Path) -> Measured:
    """(seconds, peak tree RSS MB, peak tree PSS MB, exit code, CPU seconds of the tree) of one command."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    memory = TreeMemory(proc.pid)
    code = proc.wait()
    seconds = time.perf_counter() - start
    rss, pss = memory.stop()
    return seconds, rss, pss, code, _children_cpu() - cpu


def in_process(kind: str, files: List[Path], cwd: Path) -> Measured:
    """A one-core parse of every file, in a fresh interpreter, timed inside it."""
    code = (
        "import ast, sys, time\n" + ("import libcst\n" if kind == "libcst" else "") + "paths = sys.stdin.read().split('\\n')\n"
        "start = time.perf_counter()\n"
        "for p in paths:\n"
        "    try:\n"
        "        text = open(p, encoding='utf-8').read()\n"
        + ("        libcst.parse_module(text)\n" if kind == "libcst" else "        ast.parse(text)\n")
        + "    except Exception:\n"
        "        pass\n"
        "print(time.perf_counter() - start)\n"
    )
    cpu = _children_cpu()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    memory = TreeMemory(proc.pid)
    out, _ = proc.communicate("\n".join(map(str, files)))
    rss, pss = memory.stop()
    return float(out.strip()), rss, pss, proc.returncode, _children_cpu() - cpu


REACH = """
import sys
from torchnumlint import candidates, prepass
from torchnumlint.engine import candidate_rules
from torchnumlint.rules.registry import all_rules
rules = [rule for rule in all_rules() if rule.default]
files = reached = size = parsed = 0
for path in sys.stdin.read().split("\\n"):
    try:
        text = open(path, encoding="utf-8").read()
        tree = prepass.check_syntax(text, path)
    except (OSError, UnicodeDecodeError, prepass.ParseError):
        continue
    files += 1
    size += len(text)
    active = candidate_rules(text, rules)
    masked = candidates.unneeded(text, tree, prepass.Lines(text), active) if active else None
    if masked is not None:
        reached += 1
        parsed += len(text) - sum(end - start for start, end in masked)
print(files, reached, size, parsed)
"""


def libcst_reach(files: List[Path], cwd: Path) -> str:
    """'N of M files, X of Y MB': what the pre-filter hands to LibCST."""
    proc = subprocess.run(
        [sys.executable, "-c", REACH], cwd=cwd, input="\n".join(map(str, files)), capture_output=True, text=True, check=True
    )
    total, reached, size, parsed = map(int, proc.stdout.split())
    return (
        f"{reached} of {total} files ({reached / max(total, 1):.0%}), {parsed / 1e6:.1f} of {size / 1e6:.1f} MB "
        f"({parsed / max(size, 1):.0%}) reach LibCST"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?")
    parser.add_argument("--limit", type=int, help="only the first N files (sorted by path)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--skip", default="", help="comma-separated measurement names")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if args.folder:
        folder = Path(args.folder).resolve()
    else:
        import importlib.util

        folder = Path(importlib.util.find_spec("torch").origin).parent  # no import of torch itself
    bin_dir = Path(sys.executable).parent
    tnl = [str(bin_dir / "torchnumlint")]
    with tempfile.TemporaryDirectory(prefix="tnl-speed-") as tmp:
        work = Path(tmp) / "corpus"
        files = copy_corpus(folder, work, args.limit)
        cache = str(Path(tmp) / "cache")
        size = sum(p.stat().st_size for p in files)
        print(f"corpus: {len(files)} files, {size / 1e6:.1f} MB, from {folder}")
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs ({args.jobs} jobs), load average {os.getloadavg()[0]:.2f} at the start"
        )
        rows: List[Tuple[str, int, Measured]] = []

        def measure(name: str, label: str, count: int, run) -> None:
            if name not in skip:
                rows.append((label, count, run()))
                seconds, rss, pss, code, _ = rows[-1][2]
                print(f"  ... {label}: {seconds:.2f} s (exit {code})", file=sys.stderr, flush=True)

        measure("ast", "ast.parse, one core", len(files), lambda: in_process("ast", files, work))
        measure("libcst", "libcst.parse_module, one core", len(files), lambda: in_process("libcst", files, work))
        if "reach" not in skip:
            print(libcst_reach(files, work), flush=True)
        measure("version", "torchnumlint --version", 0, lambda: command(tnl + ["--version"], work))
        measure(
            "cold-1",
            "torchnumlint cold, -j 1",
            len(files),
            lambda: command(tnl + ["-q", "-j", "1", "--cache-dir", cache + "-1", "."], work),
        )
        measure(
            "cold",
            f"torchnumlint cold, -j {args.jobs}",
            len(files),
            lambda: command(tnl + ["-q", "-j", str(args.jobs), "--cache-dir", cache, "."], work),
        )
        measure(
            "warm",
            "torchnumlint warm, nothing changed",
            len(files),
            lambda: command(tnl + ["-q", "-j", str(args.jobs), "--cache-dir", cache, "."], work),
        )
        changed = next((p for p in files if "import torch" in p.read_text(encoding="utf-8", errors="replace")), files[0])
        for name, label, edit in EDITS:
            if name not in skip:
                with open(changed, "a", encoding="utf-8") as handle:
                    handle.write(edit)
            measure(
                name,
                f"torchnumlint after {label} ({changed.relative_to(work)})",
                len(files),
                lambda: command(tnl + ["-q", "-j", str(args.jobs), "--cache-dir", cache, "."], work),
            )
        if "one-file" not in skip:
            with open(changed, "a", encoding="utf-8") as handle:
                handle.write("\n# changed\n")
        measure(
            "one-file",
            f"torchnumlint one changed file ({changed.relative_to(work)})",
            1,
            # as pre-commit passes it: relative to the root (a project's facts are cached under the
            # paths they were read by, so an absolute path here re-reads every file's facts)
            lambda: command(tnl + ["-q", "-j", str(args.jobs), "--cache-dir", cache, str(changed.relative_to(work))], work),
        )
        if shutil.which("torchfix", path=str(bin_dir)):
            measure(
                "torchfix",
                f"TorchFix 0.7.0, -j {args.jobs}",
                len(files),
                lambda: command([str(bin_dir / "torchfix"), "-j", str(args.jobs), "."], work),
            )
        base = next((r[2][0] for r in rows if r[0].startswith("ast.parse")), None)
        print(f"{'measurement':<58} {'seconds':>8} {'files/s':>8} {'x ast':>7} {'CPU s':>8} {'RSS MB':>7} {'PSS MB':>7}")
        for label, count, (seconds, rss, pss, _, cpu) in rows:
            rate = f"{count / seconds:8.0f}" if count else f"{'':>8}"
            ratio = f"{seconds / base:7.2f}" if base else f"{'':>7}"
            print(f"{label:<58} {seconds:8.2f} {rate} {ratio} {cpu:8.2f} {rss:7.0f} {pss:7.0f}")
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
