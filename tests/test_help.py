"""`--help` and the README agree: one way to call each thing, and each way is documented."""

import re
from pathlib import Path

from tests.test_cli import run

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _options(help_text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", help_text))


def test_lint_help_is_the_commands_own_usage(tmp_path):
    out = run("--help", cwd=tmp_path)
    assert out.returncode == 0
    assert out.stdout.startswith("Usage: torchnumlint [OPTIONS] [PATHS]...")
    assert run("-h", cwd=tmp_path).stdout == out.stdout
    # ruff's spelling: `check` is the lint command itself, and the bare form stays
    checked = run("check", "--help", cwd=tmp_path)
    assert checked.returncode == 0 and checked.stdout == out.stdout


def test_every_lint_option_in_help_is_in_the_readme_and_back():
    help_text = run("--help", cwd=Path.cwd()).stdout
    usage = README.split("## Usage", 1)[1].split("\n## ", 1)[0]
    block = usage.split("```", 2)[1]
    in_help = {option for option in _options(help_text) if not option.startswith("--no-")} | {"--no-cache"}
    others = {"--help", "--all", "--device", "--dtype", "--format"}  # the other commands' options
    assert in_help - others == _options(block) - others


def test_other_commands_answer_under_their_documented_names(tmp_path):
    assert run("rule", "--help", cwd=tmp_path).stdout.startswith("Usage: torchnumlint rule [OPTIONS] [CODE]")
    assert run("server", "--help", cwd=tmp_path).stdout.startswith("Usage: torchnumlint server")
    assert run("verify", "--help", cwd=tmp_path).stdout.startswith("usage: torchnumlint verify")
    for removed in ("--explain", "--list-rules"):
        assert run(removed, cwd=tmp_path).returncode == 2
    for documented in (
        "torchnumlint rule CODE",
        "torchnumlint rule --all",
        "torchnumlint verify",
        "torchnumlint server",
        "torchnumlint -- server",
    ):
        assert documented in README, documented


def test_a_folder_named_like_a_command_is_linted_after_double_dash(tmp_path):
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "app.py").write_text(
        "import torch\nimport torch.nn.functional as F\ny = torch.log(F.softmax(torch.ones(2), dim=0))\n"
    )
    out = run("--output-format", "concise", "--", "server", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout.startswith("server/app.py:3:5: TNL103")
