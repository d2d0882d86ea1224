"""How fast a one-file run gets the other files' project facts: one entry file per source file
(the layout before the pack) against the project's one SQLite pack, on a real project.

    python benchmarks/facts_store.py FOLDER [--repeat N]

Every `.py` file under FOLDER is indexed once (`index.index_file`, as the project pass does);
the facts are stored both ways in a temporary folder; then, repeatedly and alternating which
goes first (the machine may be shared), each way is read back whole, as `runner` reads them for
a pre-commit run, and the pack's digests alone are read, as the project fingerprint reads them.
Times are CPU seconds of this process (`time.process_time`), so other processes' load does not
count; the range over the repetitions is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from torchnumlint import cache as caching
from torchnumlint import index


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = sorted(p for p in Path(args.folder).rglob("*.py") if p.is_file())
    facts = {}
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        facts[caching.digest("facts", str(path), text)] = index.index_file(str(path), text)
    keys = list(facts)
    with tempfile.TemporaryDirectory(prefix="tnl-facts-") as tmp:
        files_cache = caching.Cache(os.path.join(tmp, "files"))
        pack_cache = caching.Cache(os.path.join(tmp, "pack"))
        for key, value in facts.items():
            files_cache.put("facts", key, value)
        pack_cache.put_many("facts", list(facts.items()))
        ways: Dict[str, Callable[[], int]] = {
            "one entry file per source file": lambda: sum(files_cache.get("facts", key) is not None for key in keys),
            "one SQLite pack (get_many)": lambda: len(pack_cache.get_many("facts", keys)),
            "the pack's digests alone (checks)": lambda: len(pack_cache.checks("facts", keys)),
        }
        times: Dict[str, List[float]] = {name: [] for name in ways}
        for round_ in range(args.repeat):
            order = list(ways) if round_ % 2 == 0 else list(ways)[::-1]
            for name in order:
                start = time.process_time()
                found = ways[name]()
                times[name].append(time.process_time() - start)
                assert found == len(keys), (name, found, len(keys))
        size = sum(p.stat().st_size for p in Path(tmp, "files").rglob("*") if p.is_file())
        packed = Path(tmp, "pack", "facts.sqlite").stat().st_size
    print(f"{args.folder}: {len(files)} files; facts as entry files {size / 1e6:.1f} MB, as one pack {packed / 1e6:.1f} MB")
    for name, seconds in times.items():
        print(f"  {name:<36} {min(seconds):6.3f} - {max(seconds):6.3f} s CPU over {len(seconds)} reads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
