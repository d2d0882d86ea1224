"""ruff's habits, through the installed command: `check`, `--show-files`, `--show-settings`,
`extend`, excludes that keep the defaults, `--exclude`/`--extend-exclude`/`--per-file-ignores`,
`fixable`/`unfixable`/`extend-safe-fixes`/`extend-unsafe-fixes`, `--exit-non-zero-on-fix`,
`--color` and NO_COLOR, TORCHNUMLINT_* variables, `clean`, `--isolated`."""

import os

import pytest

from tests.test_cli import UNSAFE, run

TNL101 = "train.py:6:48: TNL101"  # a safe fix
TNL102 = "train.py:10:21: TNL102"  # an unsafe fix


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(UNSAFE)
    for skipped in ("build", "venv", "node_modules", "generated"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "train.py").write_text(UNSAFE)
    return tmp_path


def concise(*args, cwd, env=None):
    return run("--output-format", "concise", "--no-cache", *args, cwd=cwd, env=env)


def config(project, body):
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n[tool.torchnumlint]\n" + body)


def test_check_is_the_lint_command_and_the_bare_form_stays(project):
    checked = run("check", "--output-format", "concise", "src", cwd=project)
    bare = run("--output-format", "concise", "src", cwd=project)
    assert checked.returncode == bare.returncode == 1 and checked.stdout == bare.stdout
    assert TNL101 in checked.stdout
    (project / "check").mkdir()
    (project / "check" / "train.py").write_text(UNSAFE)
    assert "check/train.py:6:48" in run("check", "check", cwd=project).stdout  # a folder named check
    assert "check/train.py:6:48" in run("--", "check", cwd=project).stdout


def test_a_users_exclude_keeps_the_defaults(project):
    config(project, 'exclude = ["generated"]\n')
    shown = run("--show-files", cwd=project)
    assert shown.returncode == 0 and shown.stdout.split() == ["src/train.py"]  # not build/, venv/, node_modules/


def test_extend_exclude_and_the_command_lines_excludes(project):
    assert run("--show-files", cwd=project).stdout.split() == ["generated/train.py", "src/train.py"]
    config(project, 'extend-exclude = ["generated"]\n')
    assert run("--show-files", cwd=project).stdout.split() == ["src/train.py"]
    config(project, "")
    assert run("--show-files", "--exclude", "generated", cwd=project).stdout.split() == ["src/train.py"]
    assert run("--show-files", "--extend-exclude", "src/*.py", cwd=project).stdout.split() == ["generated/train.py"]
    # relative to the current folder, whatever the config's folder
    assert run("--show-files", "--exclude", "../generated/*.py", "..", cwd=project / "src").stdout.split() == ["../src/train.py"]


def test_show_settings_names_the_config_and_the_rules(project):
    config(project, 'ignore = ["TNL102"]\nunfixable = ["TNL101"]\n')
    out = run("check", "--show-settings", "src", cwd=project)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == f"Resolved settings for: {project / 'src' / 'train.py'}"
    assert lines[1] == f"Settings path: {project / 'pyproject.toml'}"
    assert 'ignore = ["TNL102"]' in lines and 'unfixable = ["TNL101"]' in lines
    rules = next(line for line in lines if line.startswith("rules = "))
    assert '"TNL101"' in rules and '"TNL102"' not in rules


def test_extend_reads_the_base_config_and_lays_its_own_keys_over_it(project):
    (project / "base.toml").write_text('ignore = ["TNL101"]\nstrict = true\n')
    config(project, 'extend = "base.toml"\n')
    out = concise("src", cwd=project)
    assert TNL101 not in out.stdout and TNL102 in out.stdout
    config(project, 'extend = "base.toml"\nignore = ["TNL102"]\n')
    out = concise("src", cwd=project)
    assert TNL101 in out.stdout and TNL102 not in out.stdout
    (project / "base.toml").write_text('extend = "pyproject.toml"\n')
    out = concise("src", cwd=project)
    assert out.returncode == 2 and "extends itself" in out.stderr and "Traceback" not in out.stderr


def test_per_file_ignores_on_the_command_line(project):
    out = concise("--per-file-ignores", "src/*.py:TNL101", "src", cwd=project)
    assert TNL101 not in out.stdout and TNL102 in out.stdout
    bad = concise("--per-file-ignores", "src/*.py", "src", cwd=project)
    assert bad.returncode == 2 and "GLOB:CODE" in bad.stderr


@pytest.mark.parametrize(
    "body, marked",
    [
        ("", {TNL101}),
        ('unfixable = ["TNL101"]\n', set()),
        ('fixable = ["TNL102"]\n', set()),
        ('extend-safe-fixes = ["TNL102"]\n', {TNL101, TNL102}),
        ('extend-unsafe-fixes = ["TNL101"]\n', set()),
    ],
)
def test_fixable_unfixable_and_the_safety_extensions(project, body, marked):
    config(project, body)
    lines = concise("src", cwd=project).stdout.splitlines()
    assert {line.split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in lines if line.endswith("[*]")} == {
        f"src/{m.split(' ')[0]} {m.split(' ')[1]}" for m in marked
    }
    fixed = concise("--fix", "src", cwd=project)
    assert (TNL101 in fixed.stdout) == (TNL101 not in marked)


def test_exit_non_zero_on_fix(project):
    config(project, 'ignore = ["TNL102"]\n')
    assert concise("--fix", "src", cwd=project).returncode == 0  # fixed, nothing remains
    (project / "src" / "train.py").write_text(UNSAFE)
    out = concise("--fix", "--exit-non-zero-on-fix", "src", cwd=project)
    assert out.returncode == 1 and out.stdout.splitlines()[-1] == "Fixed 1 finding, 0 remaining."
    assert concise("--fix", "--exit-non-zero-on-fix", "src", cwd=project).returncode == 0  # nothing to fix
    (project / "src" / "train.py").write_text(UNSAFE)
    assert concise("--fix-only", "--exit-non-zero-on-fix", "src", cwd=project).returncode == 1


def test_colour_only_when_asked_or_on_a_terminal(project):
    plain = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    assert "\x1b[" not in concise("src", cwd=project, env=plain).stdout  # a pipe is no terminal
    coloured = concise("--color", "always", "src", cwd=project, env=plain).stdout
    assert "\x1b[1;31mTNL101\x1b[0m" in coloured
    assert "\x1b[" in concise("src", cwd=project, env={**plain, "FORCE_COLOR": "1"}).stdout
    assert "\x1b[" not in concise("src", cwd=project, env={**plain, "FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    assert "\x1b[" not in concise("--color", "always", "--output-format", "json", "src", cwd=project, env=plain).stdout
    assert "\x1b[" not in concise("--color", "never", "src", cwd=project, env={**plain, "FORCE_COLOR": "1"}).stdout


def test_options_from_environment_variables(project):
    env = {**os.environ, "TORCHNUMLINT_OUTPUT_FORMAT": "json", "TORCHNUMLINT_IGNORE": "TNL102"}
    out = run("--no-cache", "src", cwd=project, env=env)
    assert out.stdout.lstrip().startswith("[") and "TNL102" not in out.stdout and "TNL101" in out.stdout
    assert run("--output-format", "concise", "src", cwd=project, env=env).stdout.startswith("src/train.py:6:48")


def test_clean_removes_the_cache_and_nothing_else(project):
    assert run("src", cwd=project).returncode == 1
    assert (project / ".torchnumlint_cache" / "CACHEDIR.TAG").is_file()
    mine = project / "src" / ".torchnumlint_cache"  # a folder of the same name that is not a cache
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    out = run("clean", cwd=project)
    assert out.returncode == 0 and "Removed .torchnumlint_cache" in out.stderr
    assert not (project / ".torchnumlint_cache").exists() and (mine / "notes.txt").read_text() == "keep"
    assert run("clean", cwd=project).stderr.strip() == "No cache to remove."


def test_isolated_reads_no_config(project):
    config(project, 'ignore = ["TNL101", "TNL102"]\n')
    assert concise("src", cwd=project).returncode == 0
    out = concise("--isolated", "src", cwd=project)
    assert out.returncode == 1 and TNL101 in out.stdout
    assert concise("--isolated", "--config", "pyproject.toml", "src", cwd=project).returncode == 2
