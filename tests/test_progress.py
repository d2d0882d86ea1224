"""Progress on stderr: shown on a terminal for a run over more than THRESHOLD files, never when
stderr is piped nor with -q. The terminal is a real pty given to the installed command."""

import os
import pty
import subprocess

from tests.test_cli import EXE, run
from torchnumlint.progress import THRESHOLD


def _many_files(tmp_path, count):
    for i in range(count):
        (tmp_path / f"m{i:04d}.py").write_text("x = 1\n")  # no torch: the pre-filter keeps it quick
    return tmp_path


def _stderr_on_a_terminal(*args, cwd):
    """Run with stderr on a pty (stdout piped); returns (stdout, what the terminal showed)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.Popen([str(EXE), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the command closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    stdout = proc.stdout.read()
    proc.wait(timeout=120)
    os.close(leader)
    return stdout.decode(), shown.decode()


def test_a_long_run_on_a_terminal_shows_progress_then_erases_it(tmp_path):
    total = THRESHOLD + 1
    stdout, shown = _stderr_on_a_terminal("--no-cache", "-j", "1", ".", cwd=_many_files(tmp_path, total))
    assert f"torchnumlint: {total}/{total} files" in shown
    assert shown.endswith("\r")  # the line is erased: the report starts clean
    assert stdout == "All checks passed.\n"


def test_no_progress_when_quiet_or_short(tmp_path):
    project = _many_files(tmp_path, THRESHOLD + 1)
    assert _stderr_on_a_terminal("--no-cache", "-q", ".", cwd=project)[1] == ""
    (project / "short").mkdir()
    (project / "short" / "a.py").write_text("x = 1\n")
    assert _stderr_on_a_terminal("--no-cache", "short", cwd=project)[1] == ""


def test_no_progress_when_stderr_is_piped(tmp_path):
    out = run("--no-cache", ".", cwd=_many_files(tmp_path, THRESHOLD + 1))
    assert out.returncode == 0 and out.stderr == ""
