import pytest

from torchnumlint.config import ConfigError, Overrides, Settings, ignored_for, load_config, select_rules


def write(tmp_path, body, name="pyproject.toml"):
    path = tmp_path / name
    path.write_text(body)
    return path


def codes(rules):
    return [r.code for r in rules]


def nearest(folder):
    """The settings of the files in `folder`."""
    return Settings().config_for(folder)


def test_nearest_pyproject_with_our_table_wins(tmp_path):
    write(tmp_path, '[tool.torchnumlint]\nignore = ["TNL102"]\n')
    sub = tmp_path / "pkg"
    sub.mkdir()
    write(sub, "[project]\nname = 'x'\n")  # no [tool.torchnumlint]: skipped
    config = nearest(sub)
    assert config.ignore == ["TNL102"] and config.root == tmp_path


def test_no_config_gives_defaults(tmp_path):
    config = nearest(tmp_path)
    assert config.select is None and config.source is None


def test_the_working_folder_does_not_matter(tmp_path, monkeypatch):
    write(tmp_path, '[tool.torchnumlint]\nignore = ["TNL101"]\n')
    project = tmp_path / "project"
    project.mkdir()
    write(project, '[tool.torchnumlint]\nignore = ["TNL102"]\n')
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.config_of(str(project / "a.py")).ignore == ["TNL102"]
    assert settings.config_of("b.py").ignore == ["TNL101"]


def test_each_config_file_is_read_once(tmp_path, monkeypatch):
    import torchnumlint.config as configuration

    write(tmp_path, '[tool.torchnumlint]\nignore = ["TNL102"]\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    reads = []
    real = configuration._read_toml
    monkeypatch.setattr(configuration, "_read_toml", lambda path: reads.append(path) or real(path))
    settings = Settings()
    first = settings.config_of(str(tmp_path / "a" / "b" / "x.py"))
    assert settings.config_of(str(tmp_path / "a" / "y.py")) is first
    assert settings.config_of(str(tmp_path / "z.py")) is first
    assert reads == [tmp_path / "pyproject.toml"]


def test_rules_per_config_with_the_command_line_on_top(tmp_path):
    for name, body in {"a": 'ignore = ["TNL101"]', "b": 'select = ["TNL101", "TNL102"]'}.items():
        (tmp_path / name).mkdir()
        write(tmp_path / name, f"[tool.torchnumlint]\n{body}\n")
    settings = Settings(Overrides(ignore=("TNL102",)))
    in_a = codes(settings.rules_for(str(tmp_path / "a" / "x.py")))
    assert "TNL101" not in in_a and "TNL102" not in in_a and "TNL103" in in_a
    assert codes(settings.rules_for(str(tmp_path / "b" / "x.py"))) == ["TNL101"]
    replaced = Settings(Overrides(select=("TNL103",)))
    assert codes(replaced.rules_for(str(tmp_path / "b" / "x.py"))) == ["TNL103"]


def test_an_explicit_config_file_is_every_files_config(tmp_path):
    write(tmp_path, '[tool.torchnumlint]\nignore = ["TNL101"]\n')
    explicit = write(tmp_path, 'select = ["TNL102"]\n', "tnl.toml")
    settings = Settings(config_file=str(explicit))
    assert codes(settings.rules_for(str(tmp_path / "x.py"))) == ["TNL102"]
    assert settings.config_of("/elsewhere/y.py").select == ["TNL102"]


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
def test_bad_settings_name_the_key(tmp_path, body, message):
    write(tmp_path, body)
    assert nearest(tmp_path).error is not None  # walking on is not an error; the files under it are
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        Settings().config_of(str(tmp_path / "a.py"))


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
    every_rule = codes(select_rules(["ALL"], [], []))  # a prefix covers the off-by-default rules too (TNL107)
    assert codes(select_rules(["TNL10"], [], ["TNL102"])) == [c for c in every_rule if c.startswith("TNL10") and c != "TNL102"]
    assert set(codes(select_rules(["ALL"], [], []))) >= set(everything)


def test_off_by_default_rules_run_when_a_selector_covers_them():
    """As ruff: not in the default set, but enabled by their code, a prefix or ALL (every rule)."""
    from torchnumlint.rules.registry import registry

    off = sorted(code for code, rule in registry().items() if not rule.default)
    assert {"TNL211", "TNL212"} <= set(off)
    assert not set(off) & set(codes(select_rules(None, [], [])))
    assert codes(select_rules(["ALL"], [], [])) == sorted(registry())
    assert codes(select_rules(["TNL21"], [], [])) == [c for c in sorted(registry()) if c.startswith("TNL21")]
    assert "TNL211" in codes(select_rules(None, ["TNL211"], []))
    assert "TNL212" in codes(select_rules(["TNL212"], [], []))
    assert "TNL212" not in codes(select_rules(["ALL"], [], ["TNL212"]))


def test_per_file_ignores_match_relative_paths_and_names(tmp_path, monkeypatch):
    write(tmp_path, '[tool.torchnumlint]\nper-file-ignores = {"tests/*" = ["TNL1"], "legacy.py" = ["TNL101"]}\n')
    monkeypatch.chdir(tmp_path)
    config = nearest(tmp_path)
    assert ignored_for(config, str(tmp_path / "tests" / "test_x.py")) == ["TNL1"]
    assert ignored_for(config, "sub/legacy.py") == ["TNL101"]
    assert ignored_for(config, "src/model.py") == []


def test_selectors_in_the_file_are_case_insensitive(tmp_path):
    write(tmp_path, '[tool.torchnumlint]\nignore = ["tnl206"]\nper-file-ignores = {"a.py" = ["tnl1"]}\n')
    config = nearest(tmp_path)
    assert config.ignore == ["TNL206"] and config.per_file_ignores == {"a.py": ["TNL1"]}


def test_a_tool_key_that_is_not_a_table_is_an_error_not_a_traceback(tmp_path):
    path = write(tmp_path, "tool = 3\n", "c.toml")
    with pytest.raises(ConfigError, match="tool.torchnumlint.tool: unknown setting"):
        load_config(str(path))


def test_a_relative_path_takes_the_config_of_the_working_folder_it_is_read_from(tmp_path, monkeypatch):
    for name, code in (("a", "TNL101"), ("b", "TNL102")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text(f'[tool.torchnumlint]\nignore = ["{code}"]\n')
    settings = Settings()
    monkeypatch.chdir(tmp_path / "a")
    assert settings.config_of("x.py").ignore == ["TNL101"]
    monkeypatch.chdir(tmp_path / "b")
    assert settings.config_of("x.py").ignore == ["TNL102"]  # the same spelling, another folder
    assert settings.usable(["x.py"]) == (["x.py"], [])
