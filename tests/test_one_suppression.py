"""One suppression model across the front ends: the command line, standard input, flake8 (the
real one, in a subprocess) and the language server's way in (`suppression.scope` and the
engine, as the server asks them) silence the same findings of the same project: its config's
`ignore`, `per-file-ignores` and `exclude`, `# noqa: TNL1` (a prefix, as flake8 reads it),
`# flake8: noqa` and `# torchnumlint: noqa`."""

import re
import subprocess
import sys
import textwrap

import pytest

from tests.test_cli import run

MODEL = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F


    def losses(x, z):
        a = torch.log(F.softmax(x, dim=-1))  # noqa: TNL1
        b = torch.log(torch.sigmoid(z))
        c = torch.log(1 + x)
        return a, b, c
    """
)
SOFTMAX_LOG = "import torch\nimport torch.nn.functional as F\n\n\ndef f(x):\n    return torch.log(F.softmax(x, dim=-1))\n"
FILES = {
    "model.py": MODEL,  # TNL103 under a prefix noqa, TNL104 ignored by the config, TNL106 reported
    "flake_off.py": "# flake8: noqa\n" + SOFTMAX_LOG,
    "tnl_off.py": "# torchnumlint: noqa: TNL103\n" + SOFTMAX_LOG,
    "legacy.py": SOFTMAX_LOG,  # per-file-ignores
    "generated/gen.py": SOFTMAX_LOG,  # excluded
}
EXPECTED = {("model.py", 8, "TNL106")}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchnumlint]\nignore = ["TNL104"]\nper-file-ignores = { "legacy.py" = ["TNL103"] }\nexclude = ["generated"]\n'
    )
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _found(lines):
    found = set()
    for line in lines:
        match = re.match(r"^(?:\./)?(.+?):(\d+):\d+: (TNL\d+) ", line)
        if match:
            found.add((match.group(1), int(match.group(2)), match.group(3)))
    return found


def test_the_command_line(project):
    out = run("--output-format", "concise", "--no-cache", "--force-exclude", *FILES, cwd=project)
    assert _found(out.stdout.splitlines()) == EXPECTED, out.stdout + out.stderr
    walked = run("--output-format", "concise", "--no-cache", ".", cwd=project)
    assert _found(walked.stdout.splitlines()) == EXPECTED


def test_standard_input(project):
    found = set()
    for name, text in FILES.items():
        out = run("-", "--stdin-filename", name, "--force-exclude", "--output-format", "concise", cwd=project, input=text)
        assert out.returncode in (0, 1) and not out.stderr, out.stderr
        found |= _found(out.stdout.splitlines())
    assert found == EXPECTED
    # an excluded path under --fix: the text given comes back as it was, nothing else is said
    out = run("-", "--stdin-filename", "generated/gen.py", "--force-exclude", "--fix", cwd=project, input=SOFTMAX_LOG)
    assert (out.returncode, out.stdout, out.stderr) == (0, SOFTMAX_LOG, "")


def test_flake8(project):
    pytest.importorskip("flake8")
    out = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TNL", *FILES], capture_output=True, text=True, cwd=project
    )
    assert _found(out.stdout.splitlines()) == EXPECTED, out.stdout + out.stderr


def test_the_servers_way_in(project, monkeypatch):
    """What the language server asks for a buffer: `scope(path, settings)`, then the engine on
    the buffer's text with the rules and mode it gives (nothing when the file is excluded)."""
    from torchnumlint.config import Settings
    from torchnumlint.engine import lint_text
    from torchnumlint.suppression import scope

    monkeypatch.chdir(project)
    settings = Settings()
    found = set()
    for name, text in FILES.items():
        applies = scope(str(project / name), settings)
        if applies.excluded:
            continue
        findings = applies.fix_policy.apply(lint_text(name, text, list(applies.rules), strict=applies.strict))
        found |= {(f.path, f.line, f.code) for f in findings}
    assert found == EXPECTED
    assert scope(str(project / "generated" / "gen.py"), settings).excluded


def test_a_prefix_in_a_noqa_is_no_unknown_code_for_tnl900(project):
    out = run("--output-format", "concise", "--no-cache", "--extend-select", "TNL900", "model.py", cwd=project)
    assert "TNL900" not in out.stdout
    (project / "typo.py").write_text(SOFTMAX_LOG.replace("dim=-1))", "dim=-1))  # noqa: TNL1003"))
    out = run("--output-format", "concise", "--no-cache", "--extend-select", "TNL900", "typo.py", cwd=project)
    assert "TNL900 unused noqa code TNL1003: TNL1003 is not a rule" in out.stdout


def test_flake8_says_when_the_config_cannot_be_read(tmp_path):
    pytest.importorskip("flake8")
    (tmp_path / "pyproject.toml").write_bytes(b"[project]\nname = 'caf\xe9'\n")
    (tmp_path / "m.py").write_text(SOFTMAX_LOG)
    out = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TNL", "m.py"], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.stdout.startswith("m.py:1:1: TNL000 ") and "pyproject.toml: cannot read: not UTF-8" in out.stdout
    assert "Traceback" not in out.stderr
