"""The package type-checks and is formatted: mypy and ruff's formatter, configured in
pyproject.toml (mypy: the whole package, strictly the rule API; the formatter: every Python file
but the pinned examples). `.ci/run` runs both before the tests for their own output; these tests
make the README's test command fail as well when either does not pass."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_type_checks():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_formatted():
    done = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
