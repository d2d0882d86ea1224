from pathlib import Path

from torchnumlint.config import Config, Settings
from torchnumlint.discovery import discover, project_files, project_root


def tree(root: Path, *files):
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def fixed(config):
    return Settings.fixed(config)


def found(root, config=None, paths=None):
    files, errors = discover(paths or [str(root)], fixed(config or Config(root=root)))
    return sorted(Path(f).relative_to(root).as_posix() for f in files), errors


def test_walks_python_files_and_skips_the_usual_suspects(tmp_path):
    tree(
        tmp_path,
        "a.py",
        "b.pyi",
        "c.txt",
        "pkg/d.py",
        ".hidden/e.py",
        "venv/f.py",
        "__pycache__/g.py",
        "build/h.py",
        "env2/i.py",
        "node_modules/j.py",
    )
    (tmp_path / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    assert found(tmp_path) == (["a.py", "b.pyi", "pkg/d.py"], [])


def test_gitignore_is_respected_up_to_the_repo_root(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ".gitignore").write_text("local.py\n")
    tree(tmp_path, "generated/x.py", "m_pb2.py", "pkg/local.py", "pkg/keep.py", "keep.py")
    assert found(tmp_path) == (["keep.py", "pkg/keep.py"], [])


def test_exclude_replaces_and_extend_exclude_adds(tmp_path):
    tree(tmp_path, "a.py", "third_party/b.py", "build/c.py")
    config = Config(root=tmp_path, extend_exclude=["third_party"])
    assert found(tmp_path, config) == (["a.py"], [])
    config = Config(root=tmp_path, exclude=["third_party"])
    assert found(tmp_path, config) == (["a.py", "build/c.py"], [])


def test_named_files_are_linted_and_missing_paths_reported(tmp_path):
    tree(tmp_path, "venv/f.py")
    files, errors = discover([str(tmp_path / "venv" / "f.py"), str(tmp_path / "nope.py")], fixed(Config(root=tmp_path)))
    assert [Path(f).name for f in files] == ["f.py"]
    assert errors == [f"{tmp_path / 'nope.py'}: no such file or directory"]


def test_each_file_once(tmp_path):
    tree(tmp_path, "a.py")
    files, _ = discover([str(tmp_path), str(tmp_path / "a.py")], fixed(Config(root=tmp_path)))
    assert len(files) == 1


def test_each_folder_takes_the_excludes_of_its_nearest_config(tmp_path):
    tree(tmp_path, "a/gen/x.py", "a/keep.py", "b/gen/y.py", "b/keep.py")
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.torchnumlint]\nextend-exclude = ["/gen"]\n')
    files, _ = discover([str(tmp_path)], Settings())
    assert sorted(Path(f).relative_to(tmp_path).as_posix() for f in files) == ["a/keep.py", "b/gen/y.py", "b/keep.py"]


def test_project_root_is_the_nearest_folder_with_a_marker(tmp_path):
    for number, marker in enumerate(("pyproject.toml", "setup.py", "setup.cfg", ".git")):
        project = tmp_path / f"project{number}"
        (project / "src" / "pkg").mkdir(parents=True)
        (project / marker).touch()  # .git as a file: a worktree or a submodule
        assert project_root(project / "src" / "pkg", {}) == project
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "examples").mkdir()
    (tmp_path / "repo" / "examples" / "setup.py").touch()
    assert project_root(tmp_path / "repo" / "examples", {}) == tmp_path / "repo" / "examples"
    assert project_root(tmp_path / "repo", {}) == tmp_path / "repo"
    assert project_root(tmp_path, {}) is None


def test_project_files_leave_out_nested_projects_and_what_discovery_skips(tmp_path):
    tree(tmp_path, "train.py", "pkg/utils.py", "venv/lib.py", "sub/setup.py", "sub/m.py", "ignored/x.py")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    files = sorted(Path(f).relative_to(tmp_path).as_posix() for f in project_files(str(tmp_path), Settings()))
    assert files == ["pkg/utils.py", "train.py"]
    # linting a folder goes into nested projects: they are linted, as their own projects
    assert found(tmp_path)[0] == ["pkg/utils.py", "sub/m.py", "sub/setup.py", "train.py"]


def test_a_file_reached_by_two_spellings_or_a_link_is_linted_once(tmp_path):
    tree(tmp_path, "pkg/a.py", "pkg/b.py", "other/c.py")
    (tmp_path / "pkg" / "link.py").symlink_to(tmp_path / "other" / "c.py")  # a link to a file walked too
    (tmp_path / "alias").symlink_to(tmp_path / "pkg", target_is_directory=True)  # a folder by another name
    paths = [str(tmp_path), str(tmp_path / "alias" / "a.py"), str(tmp_path / "pkg" / ".." / "pkg" / "b.py")]
    files, _ = discover(paths, fixed(Config(root=tmp_path)))
    assert sorted(Path(f).relative_to(tmp_path).as_posix() for f in files) == ["other/c.py", "pkg/a.py", "pkg/b.py"]
    files, _ = discover([str(tmp_path / "other" / "c.py"), str(tmp_path / "pkg" / "link.py")], fixed(Config(root=tmp_path)))
    assert [Path(f).relative_to(tmp_path).as_posix() for f in files] == ["other/c.py"]
