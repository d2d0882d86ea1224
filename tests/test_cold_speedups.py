"""The cold run's shortcuts against what they replace, on real code: `ast_nodes` against `ast`'s
own walks, a function's scan (`summaries._Scan`) against the scan that visits every node with
`ast.iter_child_nodes`, the LibCST walk's children against plain `isinstance` tests, and the
memoised producer pre-filter (`Summaries.mentions_producer`) against a fresh project's answer to
each question; and the collector's pause during LibCST's parse, undone after. (The dispatcher's
walk is held to the same findings by every rule's examples and `test_prefilter_on_real_code.py`.)"""

import ast
import random

import libcst as cst
import pytest

from tests.real_code import EXAMPLES, torch_files
from torchnumlint import summaries
from torchnumlint.ast_nodes import child_nodes, walk
from torchnumlint.index import build_index
from torchnumlint.rules.registry import registry
from torchnumlint.source import read_source
from torchnumlint.walk import children


def _texts(count):
    return [(path, read_source(path).text) for path in torch_files(count)] + [(f"example_{i}.py", t) for i, t in enumerate(EXAMPLES)]


def _trees(count):
    found = []
    for path, text in _texts(count):
        try:
            found.append((path, ast.parse(text)))
        except SyntaxError:
            continue
    return found


def test_child_nodes_and_walk_are_ast_s():
    partial = ast.BinOp(left=ast.Name(id="x"), right=ast.Constant(1))  # fields left unset are skipped, as by `ast`
    for tree in [partial] + [tree for _, tree in _trees(150)]:
        for node in ast.walk(tree):
            assert [id(n) for n in child_nodes(node)] == [id(n) for n in ast.iter_child_nodes(node)]
        assert [id(n) for n in walk(tree)] == [id(n) for n in ast.walk(tree)]


class _Everything:
    def __contains__(self, _: object) -> bool:
        return True


_SCANNED = ("returns", "generator", "binds", "plain", "self_stores", "dynamic", "calls", "assigned", "changed")


def _scan_state(func, plain_stores):
    scan = summaries._Scan(func, plain_stores)
    return {name: getattr(scan, name) for name in _SCANNED}


def test_a_function_s_scan_is_the_scan_of_every_node(monkeypatch):
    trees = _trees(300)
    functions = [n for _, tree in trees for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    assert len(functions) > 1000
    kept = [(_scan_state(f, False), _scan_state(f, True)) for f in functions]
    monkeypatch.setattr(summaries, "child_nodes", lambda node: list(ast.iter_child_nodes(node)))
    monkeypatch.setattr(summaries, "_LOCAL_FACTS", _Everything())
    for func, (loose, plain) in zip(functions, kept):
        assert _scan_state(func, False) == loose
        assert _scan_state(func, True) == plain


def test_libcst_children_are_the_node_fields():
    """`walk.children` tests a field's value by its type, remembered; the plain test is isinstance."""
    from torchnumlint.walk import _fields

    def plain(node):
        found = []
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                found.append(value)
            elif isinstance(value, (list, tuple)):
                found.extend(item for item in value if isinstance(item, cst.CSTNode))
        return found

    for _, text in _texts(12):
        todo = [cst.parse_module(text)]
        while todo:
            node = todo.pop()
            got = list(children(node))
            assert [id(n) for n in got] == [id(n) for n in plain(node)]
            todo.extend(got)


def test_the_producer_pre_filter_answers_as_a_fresh_project():
    files = _texts(60)
    index = build_index(files)
    kept = index.summaries
    kinds = sorted({rule.produced for rule in registry().values() if rule.produced}, key=sorted)
    assert len(kinds) > 1
    rng = random.Random(7)
    questions = []
    for _, text in files:
        start = rng.randrange(len(text) + 1)
        questions += [text, text[start : start + rng.randrange(4000)]]
    answers = []
    for text in questions:
        for kind in rng.sample(kinds, len(kinds)):
            fresh = summaries.Summaries(dict(kept.files))
            expected = fresh.mentions_producer(text, kind)
            assert kept.mentions_producer(text, kind) == expected
            answers.append(expected)
    assert any(answers) and not all(answers)


@pytest.mark.parametrize("text", ["", "softmax probs", "def f(x):\n    return x"])
def test_words_are_the_text_s(text):
    assert summaries.words(text) == set(summaries._WORD.findall(text))
    assert summaries.words("other " + text) == set(summaries._WORD.findall("other " + text))


@pytest.mark.parametrize("enabled", [True, False])
def test_a_lint_leaves_the_collector_as_it_was(enabled, monkeypatch):
    """`engine.lint_text` pauses Python's cyclic collector while LibCST parses (its tree holds
    no cycles), and puts it back as it found it, for the rules' walk and after a lint that reports
    and one that raises."""
    import gc

    from torchnumlint import engine
    from torchnumlint.engine import ParseError, lint_text

    seen = []

    def parse(*args, **kwargs):
        seen.append(("parse", gc.isenabled()))
        return engine_parse(*args, **kwargs)

    def context(*args, **kwargs):
        seen.append(("rules", gc.isenabled()))
        return engine_context(*args, **kwargs)

    engine_parse, engine_context = engine._parse_masked, engine.FileContext
    monkeypatch.setattr(engine, "_parse_masked", parse)
    monkeypatch.setattr(engine, "FileContext", context)
    rules = list(registry().values())
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert lint_text("a.py", EXAMPLES[0], rules)
        assert seen == [("parse", False), ("rules", enabled)]
        assert gc.isenabled() == enabled
        with pytest.raises(ParseError):
            lint_text("b.py", "import torch\ndef f(:\n", rules)
        assert gc.isenabled() == enabled
    finally:
        gc.enable() if was else gc.disable()
