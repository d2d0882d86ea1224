"""A command line of paths and flags alone is linted without click (`cli.main`): the same output
and exit code as click's reading of it, the options at the values click would give them."""

import inspect
import subprocess
import sys

import pytest

from tests.test_cli import UNSAFE, run
from torchnumlint.cli import _FLAGS, _plain_command_line
from torchnumlint.lint_command import lint
from torchnumlint.commands import cli


def test_lints_defaults_are_what_click_gives_a_command_line_without_options():
    read = cli.make_context("torchnumlint", []).params
    defaults = {name: parameter.default for name, parameter in inspect.signature(lint).parameters.items()}
    assert defaults == read


@pytest.mark.parametrize(
    ("args", "plain"),
    [
        (["a.py", "src"], (["a.py", "src"], {})),
        ([], ([], {})),
        (["check", "a.py"], (["a.py"], {})),
        (["check", "rule"], (["rule"], {})),  # after `check` a command word is a folder
        (["rule", "TNL101"], None),
        (["clean"], None),
        (["--fix", "a.py"], (["a.py"], {"fix": True})),
        (["a.py", "-q", "--force-exclude", "b.py"], (["a.py", "b.py"], {"quiet": True, "force_exclude": True})),
        (["--strict", "a.py", "--no-strict"], (["a.py"], {"strict": False})),
        (["--select", "TNL1", "a.py"], None),  # an option with a value
        (["--output-format=json", "a.py"], None),
        (["--show-fixes", "a.py"], None),  # a usage error without --fix: click says so
        (["--add-noqa", "--fix", "a.py"], None),
        (["-qj", "2", "a.py"], None),
        (["--help"], None),
        (["-"], None),
        (["--", "server"], None),
    ],
)
def test_which_command_lines_are_paths_and_flags_alone(args, plain):
    assert _plain_command_line(list(args)) == plain


@pytest.mark.parametrize(
    "args",
    [[word, "a.py"] for word in _FLAGS]
    + [["a.py", "--unsafe-fixes", "--no-unsafe-fixes", "b.py"], ["--no-strict", "--strict", "-q", "--quiet", "a.py"], list(_FLAGS)],
)
def test_flags_are_read_as_click_reads_them(args):
    defaults = {name: parameter.default for name, parameter in inspect.signature(lint).parameters.items()}
    paths, flags = _plain_command_line(list(args))
    assert {**defaults, **flags, "paths": tuple(paths)} == cli.make_context("torchnumlint", list(args)).params


def test_an_option_variable_sends_the_command_line_to_click(monkeypatch):
    monkeypatch.setenv("TORCHNUMLINT_OUTPUT_FORMAT", "concise")
    assert _plain_command_line(["a.py"]) is None


def _modules_after(args, cwd):
    code = "import sys\nfrom torchnumlint.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\nprint('click' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return done.stdout.splitlines()[-1]


def test_paths_alone_do_not_import_click_and_an_option_does(tmp_path):
    (tmp_path / "train.py").write_text(UNSAFE)
    assert _modules_after(["train.py"], tmp_path) == "False"
    assert _modules_after(["--force-exclude", "--no-cache", "train.py"], tmp_path) == "False"
    assert _modules_after(["--output-format", "json", "train.py"], tmp_path) == "True"


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
        for flags in ([], ["--exit-zero", "-q"], ["--fix", "--diff", "--statistics"]):
            plain = run(*flags, *paths, cwd=tmp_path)
            through_click = run(*flags, "--", *paths, cwd=tmp_path)  # `--` is read by click
            assert (plain.returncode, plain.stdout, plain.stderr) == (through_click.returncode, through_click.stdout, through_click.stderr)
    assert run(*paths, cwd=tmp_path).returncode == code
