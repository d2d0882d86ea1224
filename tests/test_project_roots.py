"""Facts that cross files come from each file's project (the nearest folder above it with
pyproject.toml, setup.py, setup.cfg or .git), whichever of its files were passed: pre-commit passes
only the staged ones, and one run over several repositories must not mix their facts."""

import textwrap
from pathlib import Path

import pytest

# FUNCTION squares its input in a Function's forward (line 7); STEP applies it under fp16 autocast
from tests.test_runner import FUNCTION, STEP
from torchnumlint.config import Config, Settings
from torchnumlint.discovery import project_root
from torchnumlint.rules.registry import registry
from torchnumlint.runner import Options, run

TRAIN = """
    import torch


    def train_step(model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
"""

SCALER = """
    import torch

    scaler = torch.amp.GradScaler("cuda")
"""

# A Module whose forward computes a float16 variance (line 7), and a training step that runs it
# under fp16 autocast, importing it from `models`.
HEAD = """
    import torch
    from torch import nn


    class Head(nn.Module):
        def forward(self, h):
            return h.var(-1)
"""

TRAIN_HEAD = """
    import torch
    from models import Head


    def train_step(x, y, optimizer, loss_fn):
        model = Head()
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
"""

KL = """
    import torch.nn.functional as F


    def distill_loss(s1, s2):
        return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")
"""


def project(folder, marker="pyproject.toml", **files):
    """A project in `folder`: its marker and `files` (name without .py -> source)."""
    folder.mkdir(parents=True, exist_ok=True)
    if marker == ".git":
        (folder / marker).mkdir()
    elif marker:
        (folder / marker).write_text("")
    for name, body in files.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(body).lstrip())
    return folder


def lint(base, *paths, codes=("TNL301", "TNL302"), fix=False):
    """(path relative to `base`, code, line) of each finding of a run over `paths`."""
    result = run([str(p) for p in paths], Config(), [registry()[c] for c in codes], Options(fix=fix))
    assert result.errors == []
    return [(Path(f.path).relative_to(base).as_posix(), f.code, f.line) for f in result.findings]


def test_an_autocast_region_in_one_project_does_not_reach_another_projects_modules(tmp_path):
    project(tmp_path / "a", train=TRAIN_HEAD)
    project(tmp_path / "b", ".git", models=HEAD)  # another repository with a class of the same name
    assert lint(tmp_path, tmp_path, codes=["TNL301"]) == []
    # the same files as one project: a's region reaches the module
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a" / "pyproject.toml").unlink()
    (tmp_path / "b" / ".git").rmdir()
    assert lint(tmp_path, tmp_path, codes=["TNL301"]) == [("b/models.py", "TNL301", 7)]


def test_a_scaler_in_one_project_does_not_silence_another(tmp_path):
    project(tmp_path / "a", train=TRAIN, utils=SCALER)
    project(tmp_path / "b", "setup.py", train=TRAIN)
    assert lint(tmp_path, tmp_path) == [("b/train.py", "TNL302", 6)]


def test_a_staged_subset_is_linted_against_its_whole_project(tmp_path):
    repo = project(tmp_path, ".git", train=TRAIN, utils=SCALER + KL)
    train = repo / "train.py"
    assert lint(tmp_path, train, codes=["TNL101", "TNL301", "TNL302"]) == []  # utils.py: read, never linted
    (repo / "utils.py").write_text(textwrap.dedent(KL))
    assert lint(tmp_path, train) == [("train.py", "TNL302", 6)]


def test_files_not_passed_are_named_as_the_passed_ones_are(tmp_path, monkeypatch):
    repo = project(tmp_path / "repo", train=TRAIN_HEAD.replace("from models import", "from models.head import"))
    project(repo / "models", None, head=HEAD)
    monkeypatch.chdir(repo)
    result = run(["models/head.py"], Config(), [registry()["TNL301"]], Options())
    assert [(f.path, f.line) for f in result.findings] == [("models/head.py", 7)]
    assert "fp16 autocast (train.py:8)" in result.findings[0].message


def test_a_nested_project_is_its_own(tmp_path):
    repo = project(tmp_path, "pyproject.toml", utils=SCALER)
    project(repo / "sub", "pyproject.toml", train=TRAIN)
    project(repo / "examples", "setup.py", utils=SCALER)
    (repo / "train.py").write_text(textwrap.dedent(TRAIN).lstrip())
    assert lint(tmp_path, repo / "sub" / "train.py") == [("sub/train.py", "TNL302", 6)]
    assert lint(tmp_path, tmp_path) == [("sub/train.py", "TNL302", 6)]
    (repo / "utils.py").unlink()  # the examples' scaler does not count for the parent
    assert lint(tmp_path, repo / "train.py") == [("train.py", "TNL302", 6)]


def test_project_files_that_cannot_be_read_are_skipped_silently(tmp_path):
    repo = project(tmp_path, "setup.cfg", train=TRAIN, utils=SCALER)
    (repo / "latin.py").write_bytes(b"x = '\xe9'\n")
    (repo / "nul.py").write_bytes(b"x = 1\x00\n")
    assert lint(tmp_path, repo / "train.py") == []


def test_a_fix_is_made_from_the_project_of_the_file(tmp_path):
    project(tmp_path / "a", ops=FUNCTION, train=STEP)
    project(tmp_path / "b", ops=FUNCTION)  # nothing in b runs its Function under autocast
    assert lint(tmp_path, tmp_path, codes=["TNL301"]) == [("a/ops.py", "TNL301", 7)]
    assert lint(tmp_path, tmp_path / "a" / "ops.py", codes=["TNL301"], fix=True) == []
    assert "custom_fwd" in (tmp_path / "a" / "ops.py").read_text()
    assert "custom_fwd" not in (tmp_path / "b" / "ops.py").read_text()


def test_findings_after_fixes_are_relinted_against_the_whole_project(tmp_path):
    """A fix rewrites the staged train.py; TNL302 is then asked again, and the scaler in the
    unchanged utils.py still counts."""
    deprecated = TRAIN.replace('torch.autocast("cuda")', "torch.cuda.amp.autocast()")
    project(tmp_path / "a", train=deprecated, utils=SCALER)
    project(tmp_path / "b", train=deprecated)
    staged = [tmp_path / "a" / "train.py", tmp_path / "b" / "train.py"]
    assert lint(tmp_path, *staged, codes=["TNL302", "TNL306"], fix=True) == [("b/train.py", "TNL302", 6)]
    assert 'torch.amp.autocast("cuda")' in (tmp_path / "a" / "train.py").read_text()


def test_files_without_a_project_are_one_project_of_exactly_those_files(tmp_path):
    if project_root(tmp_path, {}) is not None:
        pytest.skip("the temporary folder is inside a project")
    project(tmp_path, None, train=TRAIN, utils=SCALER)
    assert lint(tmp_path, tmp_path / "train.py", tmp_path / "utils.py") == []
    assert lint(tmp_path, tmp_path / "train.py") == [("train.py", "TNL302", 6)]  # nothing else is read


def test_each_project_gets_its_own_config_in_one_run(tmp_path):
    kl_twice = KL + '\n\n    def wrong(a, t):\n        return F.kl_div(F.softmax(a, -1), t, reduction="batchmean")\n'
    project(tmp_path / "a", None, models=kl_twice)
    project(tmp_path / "b", None, models=kl_twice)
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.torchnumlint]\nignore = ["TNL101"]\n')
    (tmp_path / "b" / "pyproject.toml").write_text('[tool.torchnumlint]\nselect = ["TNL101"]\nunsafe-fixes = true\n')
    result = run([str(tmp_path)], Settings(), options=Options())
    assert result.errors == []
    assert [(Path(f.path).parent.name, f.code) for f in result.findings] == [("a", "TNL102"), ("b", "TNL101")]
    assert not result.unsafe_fixes  # a's config leaves them off


def test_the_project_is_read_only_when_an_enabled_rule_needs_its_index(tmp_path, monkeypatch):
    import torchnumlint.runner as runner

    repo = project(tmp_path, ".git", train=TRAIN, utils=SCALER)
    walked = []
    real = runner.project_files
    monkeypatch.setattr(runner, "project_files", lambda *args: walked.append(args) or real(*args))
    assert lint(tmp_path, repo / "train.py", codes=["TNL101"]) == [] and walked == []
    assert lint(tmp_path, repo / "train.py", codes=["TNL302"]) == [] and len(walked) == 1


def test_the_project_is_not_read_for_a_file_that_no_index_rule_can_fire_on(tmp_path, monkeypatch):
    """pre-commit on a file with no `forward` and no `autocast` (a data utility, a scheduler)
    pays for no walk of the project, whatever the project holds."""
    from torchnumlint import runner

    repo = project(tmp_path / "repo", utils="import torch\n\ndef scale(x):\n    return x * 2\n", train=TRAIN)
    walked = []
    real = runner.project_files
    monkeypatch.setattr(runner, "project_files", lambda *args: walked.append(args) or real(*args))
    assert lint(tmp_path, repo / "utils.py", codes=["TNL301", "TNL302"]) == [] and walked == []


HEADS = """
    import torch.nn.functional as F


    def class_probs(logits):
        probs = F.softmax(logits, dim=-1)
        return probs
"""

NLL_STEP = """
    import torch
    from heads import class_probs


    def nll_step(logits, targets):
        log_p = torch.log(class_probs(logits))
        return -log_p.gather(1, targets[:, None]).mean()
"""


def test_a_helper_of_another_module_is_seen_when_only_its_caller_is_staged(tmp_path):
    """pre-commit passes the caller alone, whose text names no softmax: the rule reads what the
    project's helper returns from the index, so the log of its softmax is still found (without a
    fix: the softmax is in another file)."""
    repo = project(tmp_path, heads=HEADS, train=NLL_STEP)
    assert lint(tmp_path, repo / "train.py", codes=["TNL103"]) == [("train.py", "TNL103", 6)]
    assert lint(tmp_path, repo / "train.py", codes=["TNL103"], fix=True) == [("train.py", "TNL103", 6)]


def test_a_same_named_helper_that_is_not_a_softmax_is_left_alone(tmp_path):
    repo = project(tmp_path, heads=HEADS.replace("F.softmax(logits, dim=-1)", "logits.clamp_min(1e-6)"), train=NLL_STEP)
    assert lint(tmp_path, repo / "train.py", codes=["TNL103"]) == []
