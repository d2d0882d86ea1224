"""`max-lint-size`: the largest file given to the rules (issue 22, item 5).

LibCST's tree of a file costs 50-1,250 bytes of memory per byte of source (torch's largest
files), so one 1.4 MB file lifted a run's peak by 0.7-0.9 GB. A file over the limit in which a rule could report is not linted
and is named, with its size and the setting to change, in every output format, the way a
statement the engine skips is; a file no rule can report in is syntax-checked whatever its size
(that costs `ast` alone). Its facts still reach the project index (they are read with `ast`), so
the other files' findings do not change.
"""

import json

import pytest

from tests.test_cli import run as command
from torchnumlint.config import ConfigError, Overrides, Settings, load_config
from torchnumlint.report import FORMATS
from torchnumlint.runner import Options, run

FLAGGED = "import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"
PADDING = "# " + "padding " * 200 + "\n"
BIG = FLAGGED + PADDING  # 1,671 bytes
WARNING = f"big.py: not linted: {len(BIG):,} bytes, over the limit of 1,000 (max-lint-size"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "small.py").write_text(FLAGGED)
    (tmp_path / "big.py").write_text(BIG)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lint(limit=None, **options):
    return run(["."], Settings(Overrides(max_lint_size=limit), None), options=Options(**options))


def test_a_file_over_the_limit_is_named_with_its_size_and_the_setting_and_the_rest_is_linted(project):
    result = lint(1000)
    assert [finding.path for finding in result.findings] == ["small.py"]
    assert len(result.errors) == 1 and result.errors[0].startswith(WARNING)
    assert "--max-lint-size" in result.errors[0] and "[tool.torchnumlint]" in result.errors[0]
    assert "\n" not in result.errors[0]
    assert result.files == 2  # read, and counted as such: only not given to the rules


def test_at_the_limit_and_with_no_limit_the_file_is_linted(project):
    for limit in (len(BIG), 0):
        result = lint(limit)
        assert sorted(finding.path for finding in result.findings) == ["big.py", "small.py"] and not result.errors


def test_the_default_is_a_million_bytes(project):
    assert Settings().config_of("big.py").max_lint_size == 1_000_000
    (project / "big.py").write_bytes(FLAGGED.encode() + b"x = 1\n" * 166_700)  # 1,000,268 bytes
    result = lint()
    assert result.errors == [
        "big.py: not linted: 1,000,268 bytes, over the limit of 1,000,000 (max-lint-size: raise it with "
        "--max-lint-size or `max-lint-size` in [tool.torchnumlint], 0 for no limit)"
    ]


def test_a_file_no_rule_can_report_in_is_syntax_checked_whatever_its_size(project):
    (project / "big.py").write_text("x = (1,\n" + PADDING)  # names no torch: no rule can report in it
    result = lint(1000)
    assert [error.split(": ")[1] for error in result.errors] == ["cannot parse"]
    (project / "big.py").write_text("x = 1\n" + PADDING)
    assert not lint(1000).errors


@pytest.mark.parametrize("name", [name for name in FORMATS if name not in ("text", "concise")])
def test_the_warning_is_in_every_machine_format(project, name):
    """(text and concise print it on stderr, as every file's error: the command-line test below)"""
    output = FORMATS[name](lint(1000), Options())
    assert "big.py" in output and "max-lint-size" in output


def test_a_fix_leaves_a_file_over_the_limit_as_it_is(project):
    result = lint(1000, fix=True)
    assert (project / "big.py").read_text() == BIG
    assert "log_softmax" in (project / "small.py").read_text()
    assert len(result.errors) == 1 and result.errors[0].startswith(WARNING)


def test_a_lowered_limit_is_not_answered_from_the_cache(project):
    assert not lint(0, cache=True).errors
    result = lint(1000, cache=True)
    assert len(result.errors) == 1 and result.errors[0].startswith(WARNING)
    assert [finding.path for finding in result.findings] == ["small.py"]
    assert len(lint(1000, cache=True).errors) == 1  # the warning is never cached away
    assert not lint(0, cache=True).errors


def test_the_setting_in_the_config_and_the_command_line_over_it(project):
    (project / "pyproject.toml").write_text("[tool.torchnumlint]\nmax-lint-size = 1000\n")
    done = command("--no-cache", ".", cwd=project)
    assert done.returncode == 2 and WARNING in done.stderr and "small.py:5:" in done.stdout
    done = command("--no-cache", "--max-lint-size", "0", ".", cwd=project)
    assert done.returncode == 1 and "big.py:5:" in done.stdout and "max-lint-size" not in done.stderr
    done = command("--no-cache", "--output-format", "json", ".", cwd=project)
    rows = json.loads(done.stdout)
    assert [row["filename"] for row in rows if row["code"] is None] == ["big.py"]


@pytest.mark.parametrize("value", [-1, "big", 1.5, True])
def test_a_bad_value_names_the_setting(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchnumlint]\nmax-lint-size = {json.dumps(value)}\n")
    with pytest.raises(ConfigError, match="max-lint-size: must be a number of bytes"):
        load_config(str(tmp_path / "pyproject.toml"))


def test_a_negative_limit_on_the_command_line_is_a_usage_error(project):
    done = command("--max-lint-size", "-1", ".", cwd=project)
    assert done.returncode == 2 and "--max-lint-size" in done.stderr
