"""runtime_check reads the rules' examples with `ast`; its view must be the registry's."""

import pytest

from torchnumlint import catalogue


def test_loader_view_equals_the_registry():
    from torchnumlint.rules.registry import registry  # imports libcst: fine in the tests

    live = registry()
    static = catalogue.load()
    assert sorted(static) == sorted(live)
    for code, rule in live.items():
        info = static[code]
        assert info.code == rule.code
        assert info.name == rule.name
        assert info.safety == rule.safety.name
        assert info.default == rule.default
        assert info.rationale == rule.rationale
        assert len(info.examples) == len(rule.examples), code
        for mine, theirs in zip(info.examples, rule.examples):
            assert mine.bad == theirs.bad
            assert tuple(mine.lines) == tuple(theirs.lines)
            assert mine.fixed == theirs.fixed
        assert tuple(info.good) == tuple(rule.good)


def test_loader_rejects_non_literal_examples(tmp_path):
    (tmp_path / "fam.py").write_text(
        'class R(Rule):\n    code = "TNL999"\n    safety = Safety.SAFE\n    examples = (Example(bad=make(), lines=(1,)),)\n'
    )
    with pytest.raises(catalogue.CatalogueError):
        catalogue.load(tmp_path)


def test_loader_reads_positional_and_keyword_examples(tmp_path):
    (tmp_path / "fam.py").write_text(
        "class R(Rule):\n"
        '    code = "TNL998"\n'
        '    name = "x"\n'
        "    safety = Safety.GUIDE\n"
        "    default = False\n"
        '    examples = (Example("a = (1\\n"\n'
        '                        ")\\n", (1,)), Example(bad="b", lines=[2], fixed="c"))\n'
        '    good = ("g",)\n'
        "class NotARule:\n"
        "    code = 3\n"
    )
    info = catalogue.load(tmp_path)["TNL998"]
    assert info.safety == "GUIDE" and info.default is False and info.good == ("g",)
    assert info.examples[0] == catalogue.ExampleInfo("a = (1\n)\n", (1,), None)
    assert info.examples[1] == catalogue.ExampleInfo("b", (2,), "c")
