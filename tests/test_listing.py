"""A project's file list is reused from the cache while the folders, .gitignore and
pyproject.toml files and excludes its walk depended on are as they were (`listing.py`), and
walked again when any changes: a one-file run then reads the same facts as one without the cache."""

import os
import time
from pathlib import Path

import pytest

from torchnumlint import cache as caching
from torchnumlint import discovery, listing
from torchnumlint.config import Overrides, Settings
from torchnumlint.runner import Options, run

HELPER = "import torch\n\n\ndef probs(z):\n    return torch.softmax(z, -1)\n"
USE = "import torch\nfrom pkg.helpers import probs\n\n\ndef loss(z):\n    return torch.log(probs(z))\n"


def _age(root: Path) -> None:
    """Every file and folder under `root` (and `root`) written a minute ago: past the racy window."""
    past = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past))


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "helpers.py").write_text(HELPER)
    (root / "use.py").write_text(USE)
    _age(root)
    return root


@pytest.fixture
def walks(monkeypatch):
    """How many times the project was walked."""
    seen = []
    real = listing.project_files

    def counted(*args, **kwargs):
        seen.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(listing, "project_files", counted)
    return seen


def _files(root: Path, settings: Settings = Settings()):
    return listing.project_files_listed(str(root), settings, caching.Cache(str(root.parent / "cache")))


def test_a_listing_is_reused_until_a_folder_a_gitignore_or_the_excludes_change(project, walks):
    first = _files(project)
    assert first == list(discovery.project_files(str(project), Settings())) and walks == [1]
    assert _files(project) == first and walks == [1]
    (project / "pkg" / "more.py").write_text("x = 1\n")  # a folder gains an entry
    assert str(project / "pkg" / "more.py") in _files(project) and walks == [1, 1]
    _age(project)
    _files(project)
    walks.clear()
    assert _files(project) == _files(project) and walks == []
    (project / ".gitignore").write_text("more.py\n")  # the root folder gains a .gitignore
    assert str(project / "pkg" / "more.py") not in _files(project) and walks == [1]
    _age(project)
    _files(project)
    (project / ".gitignore").write_text("nothing\n")  # the same .gitignore, changed in place
    os.utime(project, (time.time() - 60, time.time() - 60))  # its folder's mtime as it was
    assert str(project / "pkg" / "more.py") in _files(project)
    _age(project)
    _files(project)
    walks.clear()
    excluding = Settings(Overrides(exclude=("more.py",)))
    assert str(project / "pkg" / "more.py") not in list(discovery.project_files(str(project), excluding))
    walks.clear()
    assert str(project / "pkg" / "more.py") not in _files(project, excluding) and walks == [1]


def test_a_fresh_listing_is_not_stored(project, walks):
    (project / "pkg" / "new.py").write_text("y = 2\n")  # its folder written just now
    _files(project)
    _files(project)
    assert walks == [1, 1]


def test_a_one_file_run_after_files_are_added_and_deleted_reads_what_no_cache_reads(project, monkeypatch):
    monkeypatch.chdir(project)
    run(["."], Settings(), options=Options(cache=True))
    for change in ("delete", "add"):
        if change == "delete":
            (project / "pkg" / "helpers.py").unlink()
        else:
            (project / "pkg" / "helpers.py").write_text(HELPER)
        (project / "use.py").write_text((project / "use.py").read_text() + "# staged\n")
        cached = run(["use.py"], Settings(), options=Options(cache=True))
        fresh = run(["use.py"], Settings(), options=Options(cache=False))
        assert (cached.findings, cached.errors) == (fresh.findings, fresh.errors)
        assert len(fresh.findings) == (change == "add")  # the log of a softmax the helper gives
        _age(project)
