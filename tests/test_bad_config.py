"""A config that cannot be used (not UTF-8, not TOML, a bad key) is one line naming it, exit 2,
and an error for the files under it only: the rest of the run goes on. Through the installed command."""

from tests.test_cli import UNSAFE, run

LATIN1 = b"[project]\nname = 'caf\xe9'\n"  # one latin-1 byte, and no [tool.torchnumlint] table


def _stderr_lines(out):
    return [line for line in out.stderr.splitlines() if line.strip()]


def test_a_latin1_pyproject_stops_its_own_files_only(tmp_path):
    (tmp_path / "broken" / "pkg").mkdir(parents=True)
    (tmp_path / "broken" / "pyproject.toml").write_bytes(LATIN1)
    (tmp_path / "broken" / "pkg" / "train.py").write_text(UNSAFE)  # below the config, in a subfolder
    (tmp_path / "fine").mkdir()
    (tmp_path / "fine" / "train.py").write_text(UNSAFE)
    out = run("--output-format", "concise", "broken", "fine", cwd=tmp_path)
    assert out.returncode == 2
    assert _stderr_lines(out) == [
        f"{tmp_path / 'broken' / 'pyproject.toml'}: cannot read: not UTF-8 (byte 0xe9 on line 2) (1 file under it not linted)"
    ]
    assert "fine/train.py:6:48: TNL101" in out.stdout and "broken" not in out.stdout


def test_named_file_below_a_latin1_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(LATIN1)
    (tmp_path / "train.py").write_text(UNSAFE)
    out = run("train.py", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert len(_stderr_lines(out)) == 1 and "pyproject.toml: cannot read: not UTF-8" in out.stderr


def test_a_latin1_config_given_with_config(tmp_path):
    (tmp_path / "tnl.toml").write_bytes(b"select = ['TNL1']  # caf\xe9\n")
    (tmp_path / "train.py").write_text(UNSAFE)
    out = run("--config", "tnl.toml", "train.py", cwd=tmp_path)
    assert out.returncode == 2
    assert _stderr_lines(out) == ["torchnumlint: tnl.toml: cannot read: not UTF-8 (byte 0xe9 on line 1)"]


def test_standard_input_under_a_latin1_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(LATIN1)
    out = run("-", "--stdin-filename", "src/train.py", cwd=tmp_path, input=UNSAFE)
    assert out.returncode == 2
    assert len(_stderr_lines(out)) == 1 and "pyproject.toml: cannot read: not UTF-8 (byte 0xe9 on line 2)" in out.stderr


def test_a_bad_key_stops_that_projects_files_and_the_other_project_is_linted(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(UNSAFE)
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.torchnumlint]\nignor = ["TNL102"]\n')
    out = run("--output-format", "concise", "a", "b", cwd=tmp_path)
    assert out.returncode == 2 and "b/train.py:6:48: TNL101" in out.stdout and "a/train.py" not in out.stdout
    assert len(_stderr_lines(out)) == 1 and "tool.torchnumlint.ignor: unknown setting" in out.stderr
