"""The README documents what exists: its first two commands, every rule, the JSON keys."""

import re
from pathlib import Path

from torchnumlint.docs import explain
from torchnumlint.rules.registry import registry

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_starts_with_the_two_commands():
    commands = re.findall(r"```bash\n(.*?)\n```", README, re.S)[:2]
    assert commands[0].endswith("torchnumlint examples/")
    assert commands[1].endswith("python -m pytest tests") and "torch==2.13.0" in commands[1]
    assert README.index(commands[1]) < README.index("## Rules")


def test_readme_table_lists_every_rule_by_code_and_name():
    for code, rule in registry().items():
        assert f"| {code} | {rule.name} |" in README, code


def test_explain_is_generated_from_the_examples():
    for rule in registry().values():
        text = explain(rule)
        assert text.startswith(f"{rule.code} ({rule.name})")
        for example in rule.examples:
            assert example.bad.splitlines()[-1].strip() in text


def test_every_install_line_installs_from_the_clone():
    """torchnumlint is on no package index: each `pip install` the README shows installs this
    clone (`.`, `".[extra]"` with an extra pyproject.toml defines, or the clone's path from
    another project) or the pinned torch."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    root = Path(__file__).resolve().parents[1]
    extras = set(tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    lines = re.findall(r"pip install ([^`\n&|#]+)", README)
    assert len(lines) >= 5
    for line in lines:
        for target in line.split():
            target = target.strip("\"'")
            if target in (".", "/path/to/torchnumlint", "torch==2.13.0") or target.startswith("-"):
                continue
            match = re.fullmatch(r"(?:\.|/path/to/torchnumlint)\[([a-z,]+)\]", target)
            assert match and set(match.group(1).split(",")) <= extras, line
