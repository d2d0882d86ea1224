"""The cache and the workers change how fast a run is, never what it reports: on one project made
of committed code (every rule's examples and look-alikes, each a module, beside the YOLO-like
project whose files hold facts the others read), a run without the cache, serial and with
workers, a cold and a warm cached run, and a cached run after edits to files that hold project
facts (one that leaves the facts as they were, one that changes them, one that adds a helper
another file names) give the same findings and errors as a run without the cache on the same
files."""

import shutil
from pathlib import Path

import pytest

from torchnumlint.config import Settings
from torchnumlint.rules.registry import all_rules
from torchnumlint.runner import Options, run
from torchnumlint.workers import can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="workers are forked")

PROJECTS = Path(__file__).parent / "projects"


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(PROJECTS / "yolo_like", root)
    (root / "setup.py").write_text("")
    for rule in all_rules():
        for i, text in enumerate([example.bad for example in rule.examples] + list(rule.good)):
            (root / "rules" / f"{rule.code.lower()}_{i}.py").parent.mkdir(exist_ok=True)
            (root / "rules" / f"{rule.code.lower()}_{i}.py").write_text(text)
    return root


def _answer(result):
    return [(f.path, f.line, f.col, f.code, f.message) for f in result.findings], result.errors


def test_the_cache_and_the_workers_never_change_the_findings(tmp_path):
    root = _project(tmp_path)
    cache = str(tmp_path / "cache")

    def lint(**options):
        return _answer(run([str(root)], Settings(), options=Options(cache_dir=cache, **options)))

    expected = lint(cache=False)
    assert len(expected[0]) > 50  # the examples' findings are there to compare
    assert lint(cache=False, jobs=2) == expected
    assert lint(cache=True, jobs=2) == expected  # cold
    assert lint(cache=True, jobs=1) == expected  # warm
    common = root / "models" / "common.py"
    common.write_text(common.read_text() + "\n# a comment: no fact changes\n")
    assert lint(cache=True, jobs=2) == lint(cache=False)
    common.write_text(common.read_text() + "\n\nclass Late(nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n")
    assert lint(cache=True, jobs=1) == lint(cache=False, jobs=2)
    # a helper a rule's file then names: the entries whose questions it answers differently go
    common.write_text(common.read_text() + "\n\ndef late_probs(x):\n    return x.softmax(-1)\n")
    caller = root / "rules" / "tnl103_0.py"
    caller.write_text(
        caller.read_text() + "\n\nfrom models.common import late_probs\n\n\ndef late(z):\n    return torch.log(late_probs(z))\n"
    )
    assert lint(cache=True, jobs=2) == lint(cache=False, jobs=1)
