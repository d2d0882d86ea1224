"""The real `pre-commit` tool runs our hook (.pre-commit-hooks.yaml) on a temporary git repository:
it fails on an unsafe file, and with `args: [--fix]` it fixes the file and then passes."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")

UNSAFE = '''import torch
import torch.nn.functional as F


def distill_loss(s1, s2):
    return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")
'''


def git(*args, cwd):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def snapshot_of_this_repo(dest: Path) -> str:
    """This checkout's files as they are now (tracked and untracked-not-ignored), committed."""
    listed = git("ls-files", "-co", "--exclude-standard", "-z", cwd=ROOT).split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git("init", "-q", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "snapshot", cwd=dest)
    return git("rev-parse", "HEAD", cwd=dest).strip()


def pre_commit(project: Path, cache: Path):
    env = dict(os.environ, PRE_COMMIT_HOME=str(cache))
    return subprocess.run([str(PRE_COMMIT), "run", "--all-files"], cwd=project, capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.mark.skipif(not PRE_COMMIT.exists(), reason="pre-commit is part of the dev extra")
def test_hook_fails_on_unsafe_code_and_passes_after_fix(tmp_path):
    hook_repo = tmp_path / "hook"
    hook_repo.mkdir()
    rev = snapshot_of_this_repo(hook_repo)
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project)
    (project / "train.py").write_text(UNSAFE)
    config = "repos:\n- repo: {repo}\n  rev: {rev}\n  hooks:\n  - id: torchnumlint\n{args}"
    (project / ".pre-commit-config.yaml").write_text(config.format(repo=hook_repo, rev=rev, args=""))
    git("add", "-A", cwd=project)

    cache = tmp_path / "cache"
    checked = pre_commit(project, cache)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "train.py:6:48: TNL101" in checked.stdout
    assert (project / "train.py").read_text() == UNSAFE

    (project / ".pre-commit-config.yaml").write_text(config.format(repo=hook_repo, rev=rev, args="    args: [--fix]\n"))
    git("add", "-A", cwd=project)
    fixing = pre_commit(project, cache)
    assert fixing.returncode == 1  # pre-commit fails a run that modified files
    assert "log_target=True" in (project / "train.py").read_text()
    git("add", "-A", cwd=project)
    again = pre_commit(project, cache)
    assert again.returncode == 0, again.stdout + again.stderr


TRAIN = '''import torch


def train_step(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
'''


@pytest.mark.skipif(not PRE_COMMIT.exists(), reason="pre-commit is part of the dev extra")
def test_staged_file_is_linted_against_the_committed_project(tmp_path):
    """pre-commit passes only the staged train.py: the GradScaler in the unchanged utils.py counts."""
    hook_repo = tmp_path / "hook"
    hook_repo.mkdir()
    rev = snapshot_of_this_repo(hook_repo)
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hook_repo}\n  rev: {rev}\n  hooks:\n  - id: torchnumlint\n"
    )
    (project / "utils.py").write_text('import torch\n\nscaler = torch.amp.GradScaler("cuda")\n')
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "utils", cwd=project)
    (project / "train.py").write_text(TRAIN)
    git("add", "train.py", cwd=project)

    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"))
    staged = [str(PRE_COMMIT), "run"]  # no --all-files: only the staged files
    passed = subprocess.run(staged, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert passed.returncode == 0 and "TNL302" not in passed.stdout, passed.stdout + passed.stderr

    (project / "utils.py").write_text("import torch\n")
    git("commit", "-q", "-m", "no scaler", "utils.py", cwd=project)
    failed = subprocess.run(staged, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert failed.returncode == 1 and "train.py:6:10: TNL302" in failed.stdout, failed.stdout + failed.stderr
