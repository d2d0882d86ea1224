"""The stored callers table (`project_tables.Tables.called`): a one-file run reads the callers of
a function from the files the table names and the files edited since, never from every file
with a call of that name. After any sequence of edits that keeps the tables (module-level calls
added, removed or changed, lines moved: `project_tables.updated` holds; a call added inside a
function changes the call graph, and the whole index is built again), and in a file's frame
(`Summaries.with_file`), `Summaries.callers` must give what the whole index gives for every
function and method of the project.

The project: every rule's examples and the YOLO-like model (`test_same_findings._project`), and
a small package whose call sites the edits move around: by an imported name, through an
instance of a class, an inherited method on a subclass, and a module held in `self.attr`.
"""

import random
import textwrap

from tests.test_moves import _merged
from tests.test_same_findings import _project
from torchnumlint import project_tables
from torchnumlint.index import index_file

HEADS = """
    import torch


    def probs(z):
        return torch.softmax(z, -1)


    class Head(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)

        def step(self, x):
            return x


    class Tail(Head):
        pass
"""

# Each file imports everything, calls `probs` and `Head.forward` in its functions, and at module
# level what `{script}` says, below `{pad}` blank lines: calls there and moved lines leave the
# facts that `finalize` and the stored answers read alone (`graph_part`, `names_part`), so such
# an edit keeps the tables while the file's calls reach other functions.
CALLER = """
    import torch
    from heads import probs, Head, Tail


    class Trainer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = Head()

        def run(self, z):
            self.head(z)
            return z


    def loss(z):
        probs(z)
        return z

{pad}
x = torch.zeros(3)
{script}
"""

CALLS = ["", "probs(x)", "Head()(x)", "Tail().step(x)", "Head().step(x)", "probs(x); Tail()(x)", "if x.sum():\n    Tail()(x)"]
CALLERS = ("use.py", "train.py", "eval.py")


def _caller(script, pad=0):
    return textwrap.dedent(CALLER.split("{pad}")[0]).lstrip() + "\n" * pad + CALLER.split("{pad}")[1].format(script=script)


def _parts(texts):
    return {path: index_file(path, text) for path, text in texts.items()}


def _callees(summaries):
    """(path, class or None, name) of every function and method of the project."""
    for path, summary in summaries.files.items():
        for cls_name, info in summary.classes.items() if summary is not None else ():
            for name in info.methods:
                yield path, cls_name, name
        for name in summary.functions if summary is not None else ():
            yield path, None, name


def _same_callers(mine, theirs):
    found = 0
    for path, cls_name, name in _callees(theirs):
        expected = theirs.callers(path, cls_name, name)
        assert mine.callers(path, cls_name, name) == expected, (path, cls_name, name)
        found += len(expected)
    return found


def _project_texts(tmp_path):
    root = _project(tmp_path)
    texts = {str(path): path.read_text() for path in sorted(root.rglob("*.py"))}
    texts[str(root / "heads.py")] = textwrap.dedent(HEADS).lstrip()
    for name in CALLERS:
        texts[str(root / name)] = _caller("")
    return root, texts


def test_the_stored_callers_answer_as_the_whole_index_after_edits(tmp_path):
    root, texts = _project_texts(tmp_path)
    paths = list(texts)
    parts = _parts(texts)
    made = _merged(parts, paths)
    tables = project_tables.make(paths, paths, parts, made)
    assert (
        _same_callers(
            project_tables.LazyIndex(tables, lambda wanted: _parts({p: texts[p] for p in wanted}), lambda: made).summaries, made.summaries
        )
        > 0
    )
    rng = random.Random(6)
    keys = list(paths)
    stored_calls = 0
    for step in range(30):
        path = str(root / rng.choice(CALLERS))
        before = parts[path]
        texts[path] = _caller(rng.choice(CALLS), rng.randrange(3))
        parts[path] = after = index_file(path, texts[path])
        keys[paths.index(path)] = f"{path}#{step}"
        assert project_tables.updated(tables, keys, {path: before}, {path: after}) is tables, step  # calls only: the tables hold
        fresh = _parts(texts)
        lazy = project_tables.LazyIndex(tables, lambda wanted: {p: fresh[p] for p in wanted}, lambda: None)
        whole = _merged(fresh, paths)
        stored_calls += _same_callers(lazy.summaries, whole.summaries)
        # the frame of a file linted, its calls changed again since the tables were updated
        own = str(root / rng.choice(CALLERS))
        edited = index_file(own, _caller(rng.choice(CALLS), rng.randrange(3))).summaries.files[own]
        _same_callers(lazy.summaries.with_file(own, edited), whole.summaries.with_file(own, edited))
    assert stored_calls >= 30  # the edits made callers to find


def test_the_table_names_only_the_files_that_call(tmp_path):
    """What it saves: the callers of `Head.forward` are read from the files that call it, not
    from every file that calls some `forward` (each `self.attr(x)` of every model)."""
    root, texts = _project_texts(tmp_path)
    texts[str(root / "use.py")] = _caller("Head()(x)")
    paths = list(texts)
    parts = _parts(texts)
    made = _merged(parts, paths)
    tables = project_tables.make(paths, paths, parts, made)
    decoded = []

    def load(wanted):
        decoded.extend(wanted)
        return _parts({p: texts[p] for p in wanted})

    lazy = project_tables.LazyIndex(tables, load, lambda: made)
    heads = str(root / "heads.py")
    found = lazy.summaries.callers(heads, "Head", "forward")
    assert sorted({site.path for site in found}) == sorted(str(root / name) for name in CALLERS)
    forwards = tables.counts.calls["forward"]  # the files a lookup by name alone decodes
    assert len(forwards) > 10 and all(str(root / name) in decoded for name in CALLERS)
    assert len(set(decoded)) < len(forwards) // 2, sorted(decoded)
