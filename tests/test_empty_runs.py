"""Honest empty runs and `--force-exclude`: a run that linted nothing never says "All checks passed."."""

from tests.test_cli import run

SOFTMAX_LOG = "import torch\nimport torch.nn.functional as F\n\n\ndef f(x):\n    return torch.log(F.softmax(x, dim=-1))\n"


def _project(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nextend-exclude = ["third_party"]\n')
    for folder in ("generated", "third_party", "empty"):
        (tmp_path / folder).mkdir()
    (tmp_path / "generated" / "gen.py").write_text(SOFTMAX_LOG)
    (tmp_path / "third_party" / "vendored.py").write_text(SOFTMAX_LOG)
    (tmp_path / "notes.txt").write_text("not python\n")
    return tmp_path


def test_a_named_folder_without_python_files_is_a_warning_and_exit_2(tmp_path):
    project = _project(tmp_path)
    for folder in ("empty", "generated", "third_party"):
        out = run(folder, cwd=project)
        assert out.returncode == 2, (folder, out.stdout, out.stderr)
        assert out.stderr == f"warning: no Python files found under {folder}\n"
        assert "All checks passed" not in out.stdout


def test_the_default_folder_without_python_files_warns_and_exits_0(tmp_path):
    out = run(cwd=_project(tmp_path) / "empty")
    assert out.returncode == 0 and out.stdout == ""
    assert out.stderr == "warning: no Python files found under the current folder\n"


def test_machine_formats_still_write_their_empty_report(tmp_path):
    out = run("empty", "--output-format", "json", cwd=_project(tmp_path))
    assert out.returncode == 2 and out.stdout.strip() == "[]"


def test_a_named_file_is_linted_even_if_gitignored_or_excluded(tmp_path):
    project = _project(tmp_path)
    for named in ("generated/gen.py", "third_party/vendored.py"):
        out = run(named, "--output-format", "concise", cwd=project)
        assert out.returncode == 1 and out.stdout.startswith(f"{named}:6:12: TNL103"), out.stderr


def test_force_exclude_applies_excludes_and_gitignore_to_named_files(tmp_path):
    project = _project(tmp_path)
    (project / "kept.py").write_text(SOFTMAX_LOG)
    out = run("--force-exclude", "generated/gen.py", "third_party/vendored.py", "kept.py", "--output-format", "concise", cwd=project)
    assert out.returncode == 1
    assert [line.split(":")[0] for line in out.stdout.splitlines() if "TNL103" in line] == ["kept.py"]
    # pre-commit passing only excluded files: nothing to lint is what was asked, not an error
    silent = run("--force-exclude", "generated/gen.py", "third_party/vendored.py", cwd=project)
    assert (silent.returncode, silent.stdout, silent.stderr) == (0, "", "")


def test_help_says_what_force_exclude_does(tmp_path):
    help_text = " ".join(run("--help", cwd=tmp_path).stdout.split())
    assert "--force-exclude Apply excludes and .gitignore to files named explicitly too" in help_text
    assert "a file you name is linted even if excluded or ignored" in help_text
