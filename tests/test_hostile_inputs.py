"""Only regular files of a bounded size are read, and a folder or file the user cannot read is
one line of error while the rest of the run goes on (issue 21, items 4 and 8), through the
installed command.

Tests usually run as root, whom `chmod 000` does not stop. The permission tests therefore run the
command without the capabilities that let root past file modes (`setpriv` dropping
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), so the kernel refuses the read as it does for any user;
as a non-root user they run it plainly."""

import os
import shutil
import stat
import subprocess

import pytest

from tests.test_cli import EXE, run

FLAGGED = "import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"


def unprivileged(*args, cwd):
    """The installed command, as a process the file modes apply to."""
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: chmod cannot stop this process")
        drop = "-dac_override,-dac_read_search"
        prefix = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([*prefix, str(EXE), "--no-cache", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def locked(tmp_path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "a.py").write_text(FLAGGED)
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "b.py").write_text(FLAGGED)
    (tmp_path / "c.py").write_text(FLAGGED)
    os.chmod(tmp_path / "private", 0)
    os.chmod(tmp_path / "c.py", 0)
    yield tmp_path
    os.chmod(tmp_path / "private", 0o755)


def test_a_folder_the_user_cannot_read_is_one_line_and_the_rest_is_linted(locked):
    done = unprivileged(".", cwd=locked)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert [line for line in lines if "private" in line] == ["./private: cannot read folder: Permission denied"]
    assert "a.py:5:" in done.stdout and "c.py: cannot read: Permission denied" in done.stdout + done.stderr


def test_an_unreadable_file_named_on_the_command_line_is_its_own_error(locked):
    done = unprivileged("c.py", "a.py", cwd=locked)
    assert done.returncode == 2 and "Usage" not in done.stderr, done.stderr
    assert "c.py: cannot read: Permission denied" in done.stdout + done.stderr
    assert "a.py:5:" in done.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_and_a_link_to_dev_zero_are_skipped_by_name(tmp_path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "a.py").write_text(FLAGGED)
    os.mkfifo(tmp_path / "pipe.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    for args in (["."], ["pipe.py", "zero.py", "a.py"]):
        done = run("--no-cache", *args, cwd=tmp_path)
        out = done.stdout + done.stderr
        assert done.returncode == 2 and "Traceback" not in out, out
        assert "pipe.py: skipped: not a regular file (a FIFO)" in out
        assert "zero.py: skipped: not a regular file (a character device)" in out
        assert "a.py:5:" in done.stdout
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe.py").st_mode)


def test_a_file_over_the_size_limit_is_skipped_by_name_and_the_limit_is_a_setting(tmp_path):
    (tmp_path / "a.py").write_text(FLAGGED)
    (tmp_path / "generated.py").write_text(FLAGGED + "x = 1\n" * 200)
    (tmp_path / "pyproject.toml").write_text("[tool.torchnumlint]\nmax-file-size = 1000\n")
    done = run("--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 2
    assert "generated.py: skipped: 1,268 bytes, over the limit of 1,000 (max-file-size)" in done.stdout + done.stderr
    assert "a.py:5:" in done.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.torchnumlint]\nmax-file-size = 2000\n")
    done = run("--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 1 and "generated.py:5:" in done.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.torchnumlint]\nmax-file-size = "big"\n')
    done = run("--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 2 and "max-file-size: must be a positive number of bytes" in done.stdout + done.stderr


def test_the_default_limit_is_ten_megabytes(tmp_path):
    (tmp_path / "huge.py").write_bytes(b"import torch\n" + b"x = 1\n" * 1_700_000)
    done = run("--no-cache", ".", cwd=tmp_path)
    assert "huge.py: skipped: 10,200,013 bytes, over the limit of 10,000,000 (max-file-size)" in done.stdout + done.stderr
