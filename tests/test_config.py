import pytest

from torchnumlint.config import ConfigError, ignored_for, load_config, select_rules


def write(tmp_path, body, name="pyproject.toml"):
    path = tmp_path / name
    path.write_text(body)
    return path


def codes(rules):
    return [r.code for r in rules]


def test_nearest_pyproject_with_our_table_wins(tmp_path, monkeypatch):
    write(tmp_path, '[tool.torchnumlint]\nignore = ["TNL102"]\n')
    sub = tmp_path / "pkg"
    sub.mkdir()
    write(sub, "[project]\nname = 'x'\n")  # no [tool.torchnumlint]: skipped
    monkeypatch.chdir(sub)
    config = load_config()
    assert config.ignore == ["TNL102"] and config.root == tmp_path.resolve()


def test_no_config_gives_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config.select is None and config.source is None


@pytest.mark.parametrize(
    "body, message",
    [
        ('[tool.torchnumlint]\nselectt = ["TNL1"]\n', "tool.torchnumlint.selectt: unknown setting"),
        ('[tool.torchnumlint]\nselect = "TNL1"\n', "tool.torchnumlint.select: must be a list of strings"),
        ('[tool.torchnumlint]\nunsafe-fixes = "yes"\n', "tool.torchnumlint.unsafe-fixes: must be true or false"),
        ('[tool.torchnumlint]\nselect = ["TNL999"]\n', "unknown rule selector 'TNL999'"),
        ('[tool.torchnumlint]\nper-file-ignores = {"a.py" = "TNL1"}\n', "per-file-ignores: must be a table"),
        ("[tool.torchnumlint\n", "invalid TOML"),
    ],
)
def test_bad_settings_name_the_key(tmp_path, monkeypatch, body, message):
    write(tmp_path, body)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_config()


def test_explicit_config_file(tmp_path):
    path = write(tmp_path, 'select = ["TNL101"]\nunsafe-fixes = true\n', "tnl.toml")
    config = load_config(str(path))
    assert config.select == ["TNL101"] and config.unsafe_fixes
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "nope.toml"))


def test_selection_prefixes_ignore_and_defaults():
    everything = codes(select_rules(None, [], []))
    assert "TNL101" in everything and "TNL102" in everything
    assert codes(select_rules(["TNL101"], [], [])) == ["TNL101"]
    assert "TNL101" not in codes(select_rules(None, [], ["TNL101"]))
    assert codes(select_rules(["TNL10"], [], ["TNL102"])) == [c for c in everything if c.startswith("TNL10") and c != "TNL102"]
    assert codes(select_rules(["ALL"], [], [])) == everything


def test_off_by_default_rules_need_their_exact_code(monkeypatch):
    from torchnumlint.rules.base import registry

    rule = registry()["TNL102"]
    monkeypatch.setattr(rule, "default", False)
    assert "TNL102" not in codes(select_rules(None, [], []))
    assert "TNL102" not in codes(select_rules(["TNL1"], [], []))
    assert "TNL102" in codes(select_rules(None, ["TNL102"], []))


def test_per_file_ignores_match_relative_paths_and_names(tmp_path, monkeypatch):
    write(tmp_path, '[tool.torchnumlint]\nper-file-ignores = {"tests/*" = ["TNL1"], "legacy.py" = ["TNL101"]}\n')
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert ignored_for(config, str(tmp_path / "tests" / "test_x.py")) == ["TNL1"]
    assert ignored_for(config, "sub/legacy.py") == ["TNL101"]
    assert ignored_for(config, "src/model.py") == []


def test_selectors_in_the_file_are_case_insensitive(tmp_path, monkeypatch):
    write(tmp_path, '[tool.torchnumlint]\nignore = ["tnl206"]\nper-file-ignores = {"a.py" = ["tnl1"]}\n')
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config.ignore == ["TNL206"] and config.per_file_ignores == {"a.py": ["TNL1"]}


def test_a_tool_key_that_is_not_a_table_is_an_error_not_a_traceback(tmp_path):
    path = write(tmp_path, "tool = 3\n", "c.toml")
    with pytest.raises(ConfigError, match="tool.torchnumlint.tool: unknown setting"):
        load_config(str(path))
