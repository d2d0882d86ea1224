"""The bundled example shows every family of default rules, still runs after --fix
--unsafe-fixes, and then lints clean except for findings that have no rewrite by design (GUIDE
rules). It shows each family, not each rule: a new rule in a family needs no edit here."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from torchnumlint.config import Config
from torchnumlint.rules.registry import registry
from torchnumlint.runner import Options, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "unsafe_training.py"
DEFAULT = {code for code, rule in registry().items() if rule.default}


def family(code):
    """The family package of a rule: `torchnumlint.rules.<family>.<rule_module>`."""
    return registry()[code].__module__.split(".")[2]


def lint(path, fix=False):
    rules = [r for r in registry().values() if r.default]
    return run([str(path)], Config(root=path.parent), rules, Options(fix=fix, unsafe_fixes=fix))


def execute(path):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    losses = [float(line.split()[-1]) for line in out.stdout.splitlines() if line.startswith("step")]
    assert len(losses) == 3 and all(abs(v) < 1e6 for v in losses)
    return losses


def test_example_shows_every_rule():
    result = lint(EXAMPLE)
    assert not result.errors
    shown = {f.code for f in result.findings}
    assert shown <= DEFAULT
    assert {family(code) for code in shown} == {family(code) for code in DEFAULT}


def test_example_runs_before_and_after_fix(tmp_path):
    copy = tmp_path / "unsafe_training.py"
    shutil.copy(EXAMPLE, copy)
    execute(copy)
    fixed = lint(copy, fix=True)
    assert not fixed.errors and fixed.fixed >= 9
    ast.parse(copy.read_text())
    left = lint(copy).findings
    # what remains has no rewrite by design: TNL302 (no GradScaler), TNL301 on a module's forward,
    # TNL402 (label smoothing over -inf logits: smooth over the valid classes instead)
    assert left and all(f.fix is None for f in left)
    assert {f.code for f in left} == {"TNL301", "TNL302", "TNL402"}
    execute(copy)
    assert lint(copy, fix=True).fixed == 0  # a second --fix changes nothing
