"""What a clean, cached run on one file imports (issue 22, item 5: start-up).

An editor's save or a pre-commit hook runs `torchnumlint FILE` again and again, and most of those
runs find nothing in a file whose result is cached. Each module below is needed only by some runs
(a notebook, a write, a failure, a finding to show, a cache write, workers), so such a run must not
load it: importing them cost that run about a fifth of its start-up. The run's output is checked
too, so the test cannot pass by a run that failed early. `sqlite3` is not among them (about 3 ms):
a cached result is a row of the project's results pack, which a whole-project run reads in one
query (`cache.py`).
"""

import os
import subprocess
import sys
import time

LAZY = (
    "torchnumlint.notebook",  # the first notebook read (source.decode)
    "torchnumlint.atomic_write",  # the first write (source.write_source)
    "torchnumlint.report.snippet",  # the first finding to show (report.text)
    "torchnumlint.index",  # a file that reads the project's facts
    "libcst",
    "click",
    "traceback",  # a file's or a worker's failure
    "difflib",  # --diff
    "hashlib",  # (cache.digest takes blake2b without hashlib's OpenSSL)
    "tempfile",  # a cache write
    "multiprocessing",  # workers
    "dataclasses",  # (the start path's classes are `record.Record`s and named tuples: it imports `inspect`)
    "inspect",
    "tokenize",  # the first file read (source.decode)
)

_CODE = """import sys
from torchnumlint.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    print("exit", exc.code)
print(" ".join(sorted(sys.modules)))
"""


def _run(tmp_path):
    done = subprocess.run([sys.executable, "-c", _CODE, "empty.py"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    *report, exit_line, modules = done.stdout.splitlines()
    return report, exit_line, set(modules.split())


def test_a_clean_cached_run_on_one_file_loads_nothing_it_does_not_use(tmp_path):
    (tmp_path / "empty.py").write_text("")
    old = time.time() - 60  # as a file saved a while ago: the cache's manifest vouches for it (cache.RACY_SECONDS)
    os.utime(tmp_path / "empty.py", (old, old))
    _run(tmp_path)  # fills the cache
    report, exit_line, modules = _run(tmp_path)
    assert report == ["All checks passed."] and exit_line == "exit 0"
    assert (tmp_path / ".torchnumlint_cache").is_dir()
    assert "torchnumlint.runner" in modules and "torchnumlint.cache" in modules
    assert sorted(name for name in LAZY if name in modules) == []


def test_a_finding_and_a_notebook_still_load_what_they_need(tmp_path):
    (tmp_path / "empty.py").write_text("import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n")
    report, exit_line, modules = _run(tmp_path)
    assert exit_line == "exit 1" and "TNL103" in report[0]
    assert {"torchnumlint.report.snippet", "torchnumlint.notebook"} <= modules
