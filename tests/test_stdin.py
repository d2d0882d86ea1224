"""`torchnumlint - --stdin-filename PATH`, as an editor pipes a buffer into it: a real subprocess."""

from tests.test_cli import UNSAFE, run

SOFTMAX_LOG = "import torch\nimport torch.nn.functional as F\n\n\ndef f(x):\n    return torch.log(F.softmax(x, dim=-1))\n"


def _project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nper-file-ignores = { "tests/*" = ["TNL103"] }\n')
    return tmp_path


def test_stdin_is_linted_as_the_file_it_names(tmp_path):
    project = _project(tmp_path)
    out = run("-", "--stdin-filename", "src/model.py", "--output-format", "concise", cwd=project, input=SOFTMAX_LOG)
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("src/model.py:6:12: TNL103 ")
    assert not (project / "src").exists()  # PATH need not exist, and nothing is written


def test_stdin_takes_the_paths_per_file_ignores_and_config(tmp_path):
    project = _project(tmp_path)
    ignored = run("-", "--stdin-filename", "tests/test_model.py", cwd=project, input=SOFTMAX_LOG)
    assert ignored.returncode == 0 and "All checks passed." in ignored.stdout
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text('[tool.torchnumlint]\nignore = ["TNL1"]\n')
    assert run("-", "--stdin-filename", "sub/m.py", cwd=project, input=SOFTMAX_LOG).returncode == 0


def test_stdin_fix_prints_the_fixed_source_and_reports_on_stderr(tmp_path):
    project = _project(tmp_path)
    (project / "model.py").write_text("on disk, not what is linted\n")
    out = run("-", "--stdin-filename", "model.py", "--fix", cwd=project, input=SOFTMAX_LOG)
    assert out.returncode == 0, out.stderr
    assert out.stdout == SOFTMAX_LOG.replace("torch.log(F.softmax(x, dim=-1))", "F.log_softmax(x, dim=-1)")
    assert "Fixed 1 finding" in out.stderr
    assert (project / "model.py").read_text() == "on disk, not what is linted\n"
    unchanged = run("-", "--stdin-filename", "model.py", "--fix", cwd=project, input="import torch\n")
    assert unchanged.stdout == "import torch\n" and unchanged.returncode == 0


def test_stdin_fix_keeps_remaining_findings_and_exit_1(tmp_path):
    out = run("-", "--stdin-filename", "train.py", "--fix", "--output-format", "concise", cwd=_project(tmp_path), input=UNSAFE)
    assert out.returncode == 1  # the kl_div input needs an unsafe fix
    assert "log_target=True" in out.stdout and "TNL102" in out.stderr and "TNL102" not in out.stdout


def test_stdin_uses_no_cache_and_reports_parse_errors(tmp_path):
    project = _project(tmp_path)
    run("-", "--stdin-filename", "m.py", cwd=project, input=SOFTMAX_LOG)
    assert not (project / ".torchnumlint_cache").exists()
    broken = run("-", "--stdin-filename", "m.py", cwd=project, input="def f(:\n")
    assert broken.returncode == 2 and broken.stderr.startswith("m.py: cannot parse")


def test_stdin_usage_errors(tmp_path):
    assert run("-", "other.py", cwd=tmp_path, input="").returncode == 2
    named_only = run("--stdin-filename", "m.py", cwd=tmp_path, input="")
    assert named_only.returncode == 2 and "pass `-`" in named_only.stderr


def test_the_text_report_shows_the_buffer_not_the_file_on_disk(tmp_path):
    """An editor's unsaved buffer differs from the file on disk: the source lines come from the
    buffer the findings refer to."""
    project = _project(tmp_path)
    (project / "src").mkdir()
    (project / "src" / "model.py").write_text("# the saved version\n" * 10)
    out = run("-", "--stdin-filename", "src/model.py", cwd=project, input=SOFTMAX_LOG)
    assert out.returncode == 1, out.stderr
    assert "6 |     return torch.log(F.softmax(x, dim=-1))" in out.stdout
    assert "the saved version" not in out.stdout
