"""The real `pre-commit` tool runs torchnumlint's hooks in temporary git repositories.

Two forms a user writes are run as written: the README's `repo: local` snippet (read from README.md,
not copied here), and `repo: <a clone of this repository>` with `rev: <commit>`, which installs the
hooks of .pre-commit-hooks.yaml the way a published `rev:` will. Both run offline: the local hook
runs the torchnumlint installed beside the test's Python, and pre-commit's pip installs the clone
from a wheelhouse packed from the distributions installed here (PIP_NO_INDEX).
"""

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PRE_COMMIT = BIN / "pre-commit"

pytestmark = [
    pytest.mark.skipif(not PRE_COMMIT.exists(), reason=f"pre-commit is not installed at {PRE_COMMIT} (dev extra)"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH"),
]

UNSAFE = """import torch
import torch.nn.functional as F


def distill_loss(s1, s2):
    return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")
"""
FIXED_LINE = 'F.log_softmax(s2, dim=-1), reduction="batchmean", log_target=True)'

NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Eval"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "outputs": [],
            "source": ["import torch\n", "probs = torch.softmax(torch.randn(4, 10), dim=-1)"],
        },
        {
            "cell_type": "code",
            "execution_count": 2,
            "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["tensor(-2.3)\n"]}],
            "source": ["print(torch.log(probs).mean())"],
        },
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}, "language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def git(*args, cwd):
    env = dict(
        os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com"
    )
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def readme_snippet() -> str:
    """The first ```yaml block of the README's `## pre-commit` section, as a user would paste it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## pre-commit\n(.*?)(?=^## )", readme, re.S | re.M)
    assert section, "README.md has no '## pre-commit' section"
    block = re.search(r"^```yaml\n(.*?)^```", section.group(1), re.S | re.M)
    assert block, "the README's pre-commit section has no ```yaml block"
    return block.group(1)


def pack_installed(dist: importlib.metadata.Distribution, dest: Path) -> None:
    """Write an installed distribution back as a wheel: its files as installed, its dist-info, its tag."""
    wheel_meta = dist.read_text("WHEEL") or ""
    tag = re.search(r"^Tag: (\S+)", wheel_meta, re.M).group(1)
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    with zipfile.ZipFile(dest / f"{name}-{dist.version}-{tag}.whl", "w") as wheel:
        for file in dist.files:
            path = Path(dist.locate_file(file))
            if file.parts[0] != ".." and "__pycache__" not in file.parts and path.is_file():
                wheel.write(path, file.as_posix())


def runtime_closure(requirements) -> set:
    """The installed distributions that `requirements` need at run time (no extras), transitively."""
    needed, todo = set(), [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = requirement.name.lower()
        if name not in needed:
            needed.add(name)
            todo += [Requirement(r) for r in importlib.metadata.requires(name) or []]
    return needed


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """Environment for pre-commit: its own cache, pip with no index but a wheelhouse of what is installed
    here (torchnumlint's dependencies and its build backend), and this venv's bin first on PATH."""
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for name in runtime_closure(importlib.metadata.requires("torchnumlint")) | runtime_closure(build):
        try:
            pack_installed(importlib.metadata.distribution(name), wheelhouse)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{name} must be installed beside pre-commit: the offline wheelhouse is packed from it")
    return dict(
        os.environ,
        PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre-commit-home")),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """This checkout's files as they are now (tracked and untracked-not-ignored), committed: (path, commit)."""
    dest = tmp_path_factory.mktemp("torchnumlint-clone")
    listed = git("ls-files", "-co", "--exclude-standard", "-z", cwd=ROOT).split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git("init", "-q", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "snapshot", cwd=dest)
    return dest, git("rev-parse", "HEAD", cwd=dest).strip()


def project(tmp_path: Path, config: str, files: dict) -> Path:
    """A git repository with `config` as .pre-commit-config.yaml and `files` staged."""
    root = tmp_path / "project"
    root.mkdir()
    git("init", "-q", cwd=root)
    (root / ".pre-commit-config.yaml").write_text(config)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git("add", "-A", cwd=root)
    return root


def pre_commit(root: Path, env: dict, *args: str):
    return subprocess.run([str(PRE_COMMIT), "run", *args], cwd=root, capture_output=True, text=True, env=env, timeout=300)


def clone_config(clone, hook_id: str) -> str:
    path, rev = clone
    return f"repos:\n- repo: {path}\n  rev: {rev}\n  hooks:\n  - id: {hook_id}\n"


def test_readme_snippet_verbatim_fails_on_staged_unsafe_code_and_its_fix_hook_fixes_it(tmp_path, offline):
    root = project(tmp_path, readme_snippet(), {"train.py": UNSAFE})

    checked = pre_commit(root, offline)  # what `git commit` runs: the staged files
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "train.py:6:48: TNL101" in checked.stdout
    assert (root / "train.py").read_text() == UNSAFE

    fixing = pre_commit(root, offline, "--hook-stage", "manual", "torchnumlint-fix", "--all-files")
    assert fixing.returncode == 1, fixing.stdout + fixing.stderr  # pre-commit fails a run that modified files
    assert "files were modified by this hook" in fixing.stdout
    assert FIXED_LINE in (root / "train.py").read_text()

    git("add", "-A", cwd=root)
    passed = pre_commit(root, offline)
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_published_hooks_from_a_clone_at_a_commit(tmp_path, offline, clone):
    """.pre-commit-hooks.yaml as a `rev:` installs it: notebooks are linted, the project's excludes hold
    for the files pre-commit names, and torchnumlint-fix fixes."""
    files = {
        "train.py": UNSAFE,
        "eval.ipynb": json.dumps(NOTEBOOK, indent=1) + "\n",
        "vendored/old.py": UNSAFE,
        "pyproject.toml": '[tool.torchnumlint]\nextend-exclude = ["vendored"]\n',
    }
    root = project(tmp_path, clone_config(clone, "torchnumlint"), files)

    checked = pre_commit(root, offline, "--all-files")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "train.py:6:48: TNL101" in checked.stdout
    assert "eval.ipynb:cell 3:1:7: TNL103" in checked.stdout
    assert "vendored" not in checked.stdout

    (root / ".pre-commit-config.yaml").write_text(clone_config(clone, "torchnumlint-fix"))
    git("add", "-A", cwd=root)
    fixing = pre_commit(root, offline, "--all-files")
    assert fixing.returncode == 1, fixing.stdout + fixing.stderr
    assert FIXED_LINE in (root / "train.py").read_text()
    assert (root / "vendored/old.py").read_text() == UNSAFE


TRAIN = """import torch


def train_step(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
"""


def test_staged_file_is_linted_against_the_committed_project(tmp_path, offline, clone):
    """pre-commit passes only the staged train.py: the GradScaler in the unchanged utils.py counts."""
    root = project(tmp_path, clone_config(clone, "torchnumlint"), {"utils.py": 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n'})
    git("commit", "-q", "-m", "utils", cwd=root)
    (root / "train.py").write_text(TRAIN)
    git("add", "train.py", cwd=root)

    passed = pre_commit(root, offline)  # no --all-files: only the staged files
    assert passed.returncode == 0 and "TNL302" not in passed.stdout, passed.stdout + passed.stderr

    (root / "utils.py").write_text("import torch\n")
    git("commit", "-q", "-m", "no scaler", "utils.py", cwd=root)
    failed = pre_commit(root, offline)
    assert failed.returncode == 1 and "train.py:6:10: TNL302" in failed.stdout, failed.stdout + failed.stderr
