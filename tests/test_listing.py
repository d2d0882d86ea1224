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
    """The folders listed (their names), in order: every folder of the project on a whole walk."""
    seen = []
    real = discovery._Walker.project_folder

    def counted(self, folder, looked):
        seen.append(os.path.basename(os.path.abspath(folder)))
        return real(self, folder, looked)

    monkeypatch.setattr(discovery._Walker, "project_folder", counted)
    return seen


def _files(root: Path, settings: Settings = Settings()):
    return listing.project_files_listed(str(root), settings, caching.Cache(str(root.parent / "cache")))


WHOLE = ["project", "pkg"]  # the fixture's folders, as a whole walk lists them


def test_a_listing_is_reused_until_a_folder_a_gitignore_or_the_excludes_change(project, walks):
    first = _files(project)
    assert first == list(discovery.project_files(str(project), Settings())) and walks == WHOLE
    walks.clear()
    assert _files(project) == first and walks == []
    (project / "pkg" / "more.py").write_text("x = 1\n")  # a folder gains an entry: it and its parent listed again
    assert str(project / "pkg" / "more.py") in _files(project) and walks == ["project", "pkg"]
    _age(project)
    _files(project)
    walks.clear()
    assert _files(project) == _files(project) and walks == []
    (project / ".gitignore").write_text("more.py\n")  # the root folder gains a .gitignore
    assert str(project / "pkg" / "more.py") not in _files(project) and walks == WHOLE
    _age(project)
    _files(project)
    walks.clear()
    (project / ".gitignore").write_text("nothing\n")  # the same .gitignore, changed in place
    os.utime(project, (time.time() - 60, time.time() - 60))  # its folder's mtime as it was
    assert str(project / "pkg" / "more.py") in _files(project) and walks == WHOLE
    _age(project)
    _files(project)
    walks.clear()
    excluding = Settings(Overrides(exclude=("more.py",)))
    assert str(project / "pkg" / "more.py") not in list(discovery.project_files(str(project), excluding))
    walks.clear()
    assert str(project / "pkg" / "more.py") not in _files(project, excluding) and walks == WHOLE


def test_a_fresh_listing_is_not_stored(project, walks):
    (project / "pkg" / "new.py").write_text("y = 2\n")  # its folder written just now
    _files(project)
    _files(project)
    assert walks == WHOLE + WHOLE


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


def _save(path: Path, text: str) -> None:
    """An editor's save: a temporary file in the same folder renamed over the old one (`sed -i`
    does the same), which changes the folder's mtime."""
    temporary = path.parent / f".{path.name}.tmp"
    temporary.write_text(text)
    os.replace(temporary, path)


def _past(*folders: Path) -> None:
    past = time.time() - 30
    for folder in folders:
        os.utime(folder, (past, past))


@pytest.fixture
def tree(tmp_path):
    """A project of a few folders: a package with a subpackage, a nested project, a virtualenv."""
    root = tmp_path / "project"
    for folder in ("pkg/sub", "pkg/data", "tools", "vendor/lib", "env"):
        (root / folder).mkdir(parents=True)
    for name in (
        "pkg/__init__.py",
        "pkg/a.py",
        "pkg/sub/b.py",
        "pkg/sub/c.py",
        "pkg/data/conf.yaml",
        "tools/run.py",
        "vendor/lib/v.py",
        "env/e.py",
    ):
        (root / name).write_text("x = 1\n")
    (root / "setup.py").write_text("")
    (root / "vendor" / "setup.py").write_text("")  # a nested project: left out
    (root / "env" / "pyvenv.cfg").write_text("")  # a virtualenv: left out
    _age(root)
    return root


def _relisted(root: Path, walks) -> list:
    """The listing (from the stored one), checked against a fresh walk; what it listed again."""
    walks.clear()
    listed = _files(root)
    assert listed == list(discovery.project_files(str(root), Settings()))
    return sorted(walks)


def _rename(root: Path) -> None:
    os.rename(root / "pkg" / "sub" / "b.py", root / "pkg" / "sub" / "bb.py")


def _new_subfolder(root: Path) -> None:
    (root / "pkg" / "sub" / "deeper" / "deepest").mkdir(parents=True)
    (root / "pkg" / "sub" / "deeper" / "d.py").write_text("")
    (root / "pkg" / "sub" / "deeper" / "deepest" / "e.py").write_text("")


def _new_project(root: Path) -> None:
    (root / "pkg" / "sub" / "pyproject.toml").write_text("")


def _project_no_more(root: Path) -> None:
    (root / "vendor" / "setup.py").unlink()


def _virtualenv_no_more(root: Path) -> None:
    (root / "env" / "pyvenv.cfg").unlink()


def _new_gitignore(root: Path) -> None:
    (root / "pkg" / ".gitignore").write_text("a.py\n")


def _gitignore_in_place(root: Path) -> None:
    (root / "pkg" / ".gitignore").write_text("a.py\n")
    _age(root)
    _files(root)
    (root / "pkg" / ".gitignore").write_text("sub/\n")
    _past(root / "pkg")


CHANGES = {
    "added": (lambda root: (root / "pkg" / "sub" / "new.py").write_text(""), ["pkg", "sub"]),
    "removed": (lambda root: (root / "pkg" / "sub" / "c.py").unlink(), ["pkg", "sub"]),
    "renamed": (_rename, ["pkg", "sub"]),
    "saved": (lambda root: _save(root / "pkg" / "sub" / "c.py", "y = 2\n"), ["pkg", "sub"]),
    "config file added": (lambda root: (root / "pkg" / "data" / "more.yaml").write_text(""), ["data", "pkg"]),
    "new subfolder": (_new_subfolder, ["deeper", "deepest", "pkg", "sub"]),
    "folder removed": (lambda root: [os.unlink(root / "tools" / "run.py"), os.rmdir(root / "tools")], ["project"]),
    "nested project": (_new_project, ["data", "pkg", "project", "tools"]),  # a pyproject.toml decides excludes: all again
    "nested project by setup.py": (lambda root: (root / "pkg" / "sub" / "setup.py").write_text(""), ["pkg"]),
    "link to a folder": (lambda root: os.symlink(root / "tools", root / "pkg" / "link"), ["pkg", "project"]),  # listed, not followed
    "project no more": (_project_no_more, ["lib", "project", "vendor"]),
    "virtualenv no more": (_virtualenv_no_more, ["env", "project"]),
    "new .gitignore": (_new_gitignore, ["data", "pkg", "project", "sub", "tools"]),
    ".gitignore changed in place": (_gitignore_in_place, ["data", "pkg", "project", "tools"]),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_after_a_change_the_listing_is_a_fresh_walk_and_lists_again_only_what_changed(tree, walks, change):
    _files(tree)
    do, relisted = CHANGES[change]
    do(tree)
    assert _relisted(tree, walks) == relisted
    assert _relisted(tree, walks) == relisted  # a fresh listing is not stored: the same again
    _age(tree)
    _relisted(tree, walks)  # stored now
    assert _relisted(tree, walks) == []


def test_a_saved_file_relists_its_folder_and_parent_and_the_result_is_kept(tree, walks):
    _files(tree)
    _save(tree / "pkg" / "a.py", "y = 2\n")
    _past(tree / "pkg")
    assert _relisted(tree, walks) == ["pkg", "project"]
    assert _relisted(tree, walks) == []
