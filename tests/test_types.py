"""The package type-checks: mypy, configured in pyproject.toml (the whole package; strictly the
rule API). `.ci/run` runs it before the tests for its own output; this test makes the README's
test command fail as well when the types do not check."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_type_checks():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
