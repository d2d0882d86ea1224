"""A command line of paths alone is linted without click (`cli.main`): the same output and exit
code as click's reading of it, the options at the values click would give them."""

import inspect
import subprocess
import sys

import pytest

from tests.test_cli import UNSAFE, run
from torchnumlint.cli import _paths_alone
from torchnumlint.lint_command import lint
from torchnumlint.commands import cli


def test_lints_defaults_are_what_click_gives_a_command_line_without_options():
    read = cli.make_context("torchnumlint", []).params
    defaults = {name: parameter.default for name, parameter in inspect.signature(lint).parameters.items()}
    assert defaults == read


@pytest.mark.parametrize(
    ("args", "paths"),
    [
        (["a.py", "src"], ["a.py", "src"]),
        ([], []),
        (["check", "a.py"], ["a.py"]),
        (["check", "rule"], ["rule"]),  # after `check` a command word is a folder
        (["rule", "TNL101"], None),
        (["clean"], None),
        (["--fix", "a.py"], None),
        (["a.py", "-q"], None),
        (["-"], None),
        (["--", "server"], None),
    ],
)
def test_which_command_lines_are_paths_alone(args, paths):
    assert _paths_alone(list(args)) == paths


def test_an_option_variable_sends_the_command_line_to_click(monkeypatch):
    monkeypatch.setenv("TORCHNUMLINT_OUTPUT_FORMAT", "concise")
    assert _paths_alone(["a.py"]) is None


def _modules_after(args, cwd):
    code = "import sys\nfrom torchnumlint.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\nprint('click' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return done.stdout.splitlines()[-1]


def test_paths_alone_do_not_import_click_and_an_option_does(tmp_path):
    (tmp_path / "train.py").write_text(UNSAFE)
    assert _modules_after(["train.py"], tmp_path) == "False"
    assert _modules_after(["--no-cache", "train.py"], tmp_path) == "True"


@pytest.mark.parametrize(
    ("files", "code"),
    [
        ({"train.py": UNSAFE, "clean.py": "import torch\n"}, 1),  # findings
        ({"clean.py": "import torch\nx = torch.ones(3)\n"}, 0),  # nothing
        ({"broken.py": "import torch\nx = (\n"}, 2),  # an error
        ({"notes.txt": "no Python here\n"}, 2),  # no Python file under a path named
    ],
)
def test_the_same_report_and_exit_code_as_through_click(tmp_path, files, code):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for paths in ([".", "missing.py"], ["."]):
        plain = run(*paths, cwd=tmp_path)
        through_click = run("--", *paths, cwd=tmp_path)  # `--` is read by click
        assert (plain.returncode, plain.stdout, plain.stderr) == (through_click.returncode, through_click.stdout, through_click.stderr)
    assert plain.returncode == code
