"""The installed `torchnumlint` command, run as a real subprocess."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXE = Path(sys.executable).with_name("torchnumlint")

UNSAFE = """import torch
import torch.nn.functional as F


def distill_loss(s1, s2):
    return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")


def wrong_input(a, t):
    return F.kl_div(F.softmax(a, dim=-1), t, reduction="batchmean")
"""


def run(*args, cwd, input=None, env=None):
    """The installed command in `cwd` (text in and out; `input` is its standard input; `env`
    instead of this process's environment)."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if not k.startswith("PYTEST")}
    return subprocess.run([str(EXE), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120, input=input)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(UNSAFE)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.ones(3)\n")
    return tmp_path


def test_findings_exit_1_with_ruff_like_lines(project):
    full = run(".", cwd=project)
    assert full.returncode == 1, full.stderr
    assert "train.py:6:48: TNL101 " in full.stdout and "^" in full.stdout  # the line, marked under the span
    out = run("--output-format", "concise", ".", cwd=project)
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("train.py:6:48: TNL101 ") and lines[0].endswith("[*]")
    assert lines[1].startswith("train.py:10:21: TNL102 ") and not lines[1].endswith("[*]")
    assert lines[-1] == "Found 2 findings (1 fixable with --fix, 1 more with --unsafe-fixes)."


def test_default_path_is_the_current_folder(project):
    assert run(cwd=project).returncode == 1


def test_fix_then_clean_and_idempotent(project):
    out = run("--fix", ".", cwd=project)
    assert out.returncode == 1  # the unsafe one remains
    assert out.stdout.splitlines()[-1] == "Fixed 1 finding, 1 remaining (1 more with --unsafe-fixes)."
    first = (project / "train.py").read_text()
    assert "log_target=True" in first
    out = run("--fix", "--unsafe-fixes", ".", cwd=project)
    assert out.returncode == 0, out.stdout + out.stderr
    second = (project / "train.py").read_text()
    assert "F.kl_div(F.log_softmax(a, dim=-1), t" in second
    assert run("--fix", "--unsafe-fixes", ".", cwd=project).returncode == 0
    assert (project / "train.py").read_text() == second
    compile(second, "train.py", "exec")


def test_diff_writes_nothing(project):
    out = run("--diff", "train.py", cwd=project)
    assert out.returncode == 1
    assert "+    return F.kl_div(F.log_softmax(s1, dim=-1), F.log_softmax(s2, dim=-1)" in out.stdout
    assert (project / "train.py").read_text() == UNSAFE


def test_select_ignore_exit_zero_quiet_statistics(project):
    assert run("--select", "TNL102", "-q", "--output-format", "concise", ".", cwd=project).stdout.count("TNL") == 1
    assert run("--ignore", "TNL1", ".", cwd=project).returncode == 0
    assert run("--exit-zero", ".", cwd=project).returncode == 0
    quiet = run("-q", "--output-format", "concise", ".", cwd=project).stdout
    assert "Found" not in quiet and quiet.count("\n") == 2
    stats = run("--statistics", ".", cwd=project).stdout.splitlines()
    assert stats[0].split()[:3] == ["1", "TNL101", "[*]"]


def test_unknown_selector_is_a_usage_error(project):
    out = run("--select", "TNL999", ".", cwd=project)
    assert out.returncode == 2 and "unknown rule selector 'TNL999'" in out.stderr


def test_output_file_takes_the_report(project):
    out = run("--output-format", "sarif", "--output-file", "report.sarif", ".", cwd=project)
    assert out.returncode == 1 and out.stdout == ""
    assert '"version": "2.1.0"' in (project / "report.sarif").read_text()


def test_json_output_is_documented_shape(project):
    out = run("--output-format", "json", ".", cwd=project)
    data = json.loads(out.stdout)
    assert [d["code"] for d in data] == ["TNL101", "TNL102"]
    first = data[0]
    assert set(first) == {"code", "name", "message", "filename", "cell", "location", "end_location", "fix"}
    assert first["location"] == {"row": 6, "column": 48}
    assert first["fix"]["applicability"] == "safe"
    edit = first["fix"]["edits"][0]
    assert "log_target=True" in edit["content"] and edit["location"]["row"] == 6
    assert data[1]["fix"]["applies_with"] == "--unsafe-fixes"


def test_pyproject_settings_and_bad_config(project):
    (project / "pyproject.toml").write_text('[tool.torchnumlint]\nignore = ["TNL102"]\n')
    assert run("-q", ".", cwd=project).stdout.count("TNL102") == 0
    (project / "pyproject.toml").write_text('[tool.torchnumlint]\nignor = ["TNL102"]\n')
    out = run(".", cwd=project)
    assert out.returncode == 2
    assert "tool.torchnumlint.ignor: unknown setting" in out.stderr and "Traceback" not in out.stderr


def test_bad_inputs_are_reported_and_the_rest_is_still_linted(project):
    broken = b"import torch\nimport torch.nn.functional as F\ndef f(:\n    F.kl_div(a, b)\n"
    (project / "syntax.py").write_bytes(broken)
    (project / "nul.py").write_bytes(b"x = 1\x00\n")
    (project / "latin.py").write_bytes(b"x = '\xe9'\n")
    out = run("--fix", ".", "missing.py", cwd=project)
    assert out.returncode == 2
    errors = sorted(out.stderr.splitlines())
    assert errors == [
        "latin.py: cannot decode as utf-8: byte 0xe9 at offset 5",
        "missing.py: no such file or directory",
        "nul.py: cannot parse: source contains a NUL byte",
        "syntax.py: cannot parse: line 3, column 7: invalid syntax",
    ]
    assert (project / "syntax.py").read_bytes() == broken  # never written
    assert "log_target=True" in (project / "train.py").read_text()  # the good file was fixed
    assert "Traceback" not in out.stderr


def test_rule_docs_and_list(project):
    out = run("rule", "TNL101", cwd=project)
    assert out.returncode == 0
    assert out.stdout.startswith("TNL101 (kl-div-prob-target)")
    assert 'F.log_softmax(s2, dim=-1), reduction="batchmean", log_target=True' in out.stdout
    assert run("rule", "tnl101", cwd=project).stdout == out.stdout
    listing = run("rule", "--all", cwd=project).stdout
    assert "TNL101  kl-div-prob-target" in listing
    assert run("rule", cwd=project).returncode == 2  # a CODE or --all
    bad = run("rule", "TNL999", cwd=project)
    assert bad.returncode == 2 and "unknown rule" in bad.stderr


def test_version_and_module_entry_point(project):
    from torchnumlint import __version__

    assert run("--version", cwd=project).stdout.strip().endswith(__version__)
    out = subprocess.run([sys.executable, "-m", "torchnumlint", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and __version__ in out.stdout


def test_importing_the_package_does_not_import_libcst():
    code = "import sys, torchnumlint; print('libcst' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the patch tool")
def test_diff_of_a_file_without_final_newline_is_a_valid_patch(project):
    (project / "train.py").write_text(UNSAFE.rstrip("\n"))
    out = run("--diff", "--unsafe-fixes", "train.py", cwd=project)
    assert out.stdout.endswith("\n\\ No newline at end of file\n")
    patched = subprocess.run(["patch", "--dry-run", "-p1"], input=out.stdout, cwd=project, capture_output=True, text=True)
    assert patched.returncode == 0, patched.stdout + patched.stderr


def test_fix_summary_is_printed_even_when_another_file_is_broken(project):
    (project / "broken.py").write_text("import torch\ndef f(:\n")
    out = run("--fix", ".", cwd=project)
    assert out.returncode == 2
    assert out.stdout.splitlines()[-1].startswith("Fixed 1 finding")


def test_each_file_takes_the_config_nearest_to_it_not_the_working_folders(tmp_path):
    for name, settings in {"a": 'ignore = ["TNL102"]', "b": "unsafe-fixes = true", "c": None}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(UNSAFE)
        if settings:
            (tmp_path / name / "pyproject.toml").write_text(f"[tool.torchnumlint]\n{settings}\n")
    out = run("-q", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[0] + " " + line.split()[1] for line in out.stdout.splitlines()] == [
        "a/train.py TNL101",
        "b/train.py TNL101",
        "b/train.py TNL102",
        "c/train.py TNL101",
        "c/train.py TNL102",
    ]
    # from inside a, c is linted without a's settings
    assert run("-q", "--output-format", "concise", "../c", cwd=tmp_path / "a").stdout.count("TNL102") == 1
    # --config gives every file the same settings
    (tmp_path / "tnl.toml").write_text('select = ["TNL102"]\n')
    assert run("-q", "--output-format", "concise", "--config", "tnl.toml", ".", cwd=tmp_path).stdout.count("TNL102") == 3
    # b's unsafe-fixes applies to b only
    out = run("--fix", ".", cwd=tmp_path)
    assert out.stdout.splitlines()[-1] == "Fixed 4 findings, 1 remaining (1 more with --unsafe-fixes)."
    assert "F.kl_div(F.log_softmax(a, dim=-1), t" in (tmp_path / "b" / "train.py").read_text()
    assert "F.kl_div(F.softmax(a, dim=-1), t" in (tmp_path / "c" / "train.py").read_text()


def test_strict_mode_from_the_command_line_and_from_the_config(tmp_path):
    """A division by a sum with no evidence that it reaches 0 is reported only in strict mode,
    asked for by `--strict` or `strict = true`; `--no-strict` overrides the config."""
    (tmp_path / "pool.py").write_text("import torch\n\n\ndef share(scores):\n    s = scores.sum(-1, keepdim=True)\n    return scores / s\n")
    assert run("--select", "TNL201", ".", cwd=tmp_path).returncode == 0
    out = run("--select", "TNL201", "--strict", ".", cwd=tmp_path)
    assert out.returncode == 1 and "strict mode" in out.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.torchnumlint]\nstrict = true\n")
    assert run("--select", "TNL201", ".", cwd=tmp_path).returncode == 1
    assert run("--select", "TNL201", "--no-strict", ".", cwd=tmp_path).returncode == 0
    (tmp_path / "pyproject.toml").write_text("[tool.torchnumlint]\nstrict = 1\n")
    out = run(".", cwd=tmp_path)
    assert out.returncode == 2 and "tool.torchnumlint.strict: must be true or false" in out.stderr


def test_the_summary_counts_what_fix_will_fix_under_the_flags_given(tmp_path):
    """With --unsafe-fixes, "N fixable with --fix" counts the unsafe fixes too: N is what
    `--fix --unsafe-fixes` then fixes (on the bundled example: 21, where it once said 15)."""
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "unsafe_training.py", tmp_path)
    said = run("--no-cache", "--unsafe-fixes", "--output-format", "concise", ".", cwd=tmp_path).stdout.splitlines()[-1]
    count = int(said.split("(")[1].split()[0])
    assert said.endswith(f"({count} fixable with --fix).")
    done = run("--no-cache", "--fix", "--unsafe-fixes", ".", cwd=tmp_path).stdout.splitlines()[-1]
    # the fix loop runs to a fixpoint: a fix can bring a further fixable finding to light (on the
    # bundled example one more TNL308 site once the fills around it are fixed), never fewer
    fixed = int(done.split()[1])
    assert done.startswith("Fixed ") and count <= fixed <= count + 2, (said, done)


def test_rule_docs_show_messages_as_reported():
    """`rule CODE` and `rule --all` print each message as a finding reads, never a placeholder
    (`<note>`) or a `...` fragment."""
    from torchnumlint.rules.registry import registry

    listing = run("rule", "--all", cwd=Path.cwd()).stdout
    assert "<note>" not in listing and "{" not in listing
    for code in registry():
        assert code in listing
    flat = " ".join(listing.split())
    assert (
        "log of a softmax is -inf once a probability underflows to 0 (then NaN in 0 * log 0 and in the gradient); use `log_softmax`"
    ) in flat  # whole, where it once read "log of a softmax ...; use ..."
    docs = run("rule", "TNL101", cwd=Path.cwd()).stdout
    assert "<note>" not in docs and "Message (as reported on example 1):" in docs


def test_verify_without_torch_is_one_line_and_exit_2(tmp_path):
    """A `torch` that cannot be imported (a module on PYTHONPATH that raises as a missing one does)."""
    (tmp_path / "torch.py").write_text('raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    out = run("verify", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "torchnumlint verify needs torch: pip install \".[runtime]\" in a clone of torchnumlint (No module named 'torch')"
    ]
