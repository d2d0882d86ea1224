"""What the lint process keeps between changes beyond the index itself, and that it never changes a
finding: the other files' call sites by callee name (`server/calls.py`), a buffer's index kept
across a save of that buffer while the other buffers' go (`ProjectFacts._stale`), a save that
changes no fact (nothing goes), and the last findings of a text linted again with the same index
(`_Worker._linted`). After every edit the server's findings for the buffer are compared with a
fresh whole run without the cache over the project as it would be on disk with the buffer saved.
"""

import ast
import os
import random
import re
import textwrap
from pathlib import Path

import torch

from tests import real_edits
from tests.real_code import EXAMPLES, real_texts, with_example

from torchnumlint import engine
from torchnumlint.config import Settings
from torchnumlint.index import ProjectIndex
from torchnumlint.runner import Options, run
from torchnumlint.server import facts as facts_module, messages
from torchnumlint.relint_scope import Region, Snapshot, plan, region
from torchnumlint.server.worker import _Worker
from torchnumlint.source import read_source
from torchnumlint.summaries import Summaries

# the buffer: a function whose divisor is a count only its callers in another file show, and a
# method whose divisor only a call through an instance in the buffer itself shows
LOSSES = textwrap.dedent(
    """\
    import torch


    def normalise(loss, count):
        return loss.sum() / count


    class Reducer:
        def mean(self, loss, count):
            return loss.sum() / count


    def use(x):
        reducer = Reducer()
        return reducer.mean(x, (x > 2).sum())
    """
)
TRAIN = textwrap.dedent(
    """\
    import torch

    from losses import normalise


    def step(x):
        keep = x > 0.5
        return normalise(x[keep], keep.sum())
    """
)
# the caller in the other file passes a plain number now, a line lower: `normalise`'s division has
# no evidence, and the call site moved
TRAIN_CHANGED = TRAIN.replace("    return normalise(x[keep], keep.sum())", "    scale = 4.0\n    return normalise(x[keep], scale)")
assert TRAIN_CHANGED != TRAIN


class _Pipe:
    def __init__(self) -> None:
        self.said: list = []

    def send(self, message: object) -> None:
        self.said.append(message)


def _found(findings, path: Path):
    return sorted((f.line, f.col, f.code, f.message) for f in findings if Path(f.path).resolve() == path.resolve())


def _sites(table, names):
    return {name: sorted(table.get(name, ())) for name in names}


def _served_worker(root: Path, buffer: Path) -> _Worker:
    worker = _Worker(_Pipe())  # type: ignore[arg-type]
    facts = worker.projects.of(str(buffer))
    assert facts is not None
    while not facts.complete:
        worker.gather(facts)
    return worker


def _lint(worker: _Worker, root: Path, buffer: Path, text: str):
    """The server's findings for `buffer` holding `text`, and a fresh whole run's."""
    served = worker.answer(messages.Lint(str(buffer), text, 60.0))
    assert isinstance(served, messages.Linted), served
    before = buffer.read_text()
    buffer.write_text(text)
    fresh = run([str(root)], Settings(), options=Options(cache=False))
    buffer.write_text(before)
    assert not fresh.errors
    return _found(served.findings, buffer), _found(fresh.findings, buffer)


def _same_calls(worker: _Worker, buffer: Path, text: str) -> None:
    """The call sites the kept table gives are those a fresh `Summaries` of the same files indexes."""
    facts = worker.projects.of(str(buffer))
    assert facts is not None
    summaries = facts.index_for(str(buffer), text).summaries
    fresh = Summaries(dict(summaries.files))._named_calls()
    kept = summaries._named_calls()
    names = set(fresh) | set(kept)
    assert _sites(kept, names) == _sites(fresh, names)


def test_callers_in_other_files_and_in_the_buffer_give_a_whole_lints_findings(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    losses, train = tmp_path / "losses.py", tmp_path / "train.py"
    losses.write_text(LOSSES)
    train.write_text(TRAIN)
    worker = _served_worker(tmp_path, losses)
    moved = "# a note\n" + LOSSES
    typed = moved.replace("    reducer = Reducer()\n", "    scale = float(3)\n    reducer = Reducer()\n")
    helper = typed + "\n\ndef added(x):\n    return normalise(x, 3.0)\n"
    steps = [("as opened", LOSSES), ("a line above", moved), ("a call typed", typed), ("a helper added", helper)]
    for what, text in steps:
        served, fresh = _lint(worker, tmp_path, losses, text)
        assert served == fresh, what
        _same_calls(worker, losses, text)
    messages_now = [message for _, _, code, message in served if code == "TNL201"]
    # evidence from the other file's caller, and from a call through an instance in the buffer
    assert any("train.py:8)" in message for message in messages_now), messages_now
    assert any("to `mean` by the call (line" in message for message in messages_now), messages_now
    # the other file changes on disk: its call sites are indexed again
    train.write_text(TRAIN_CHANGED)
    worker.handle(messages.Saved(str(train), TRAIN_CHANGED))
    served, fresh = _lint(worker, tmp_path, losses, helper)
    assert served == fresh
    assert not any("train.py" in message for _, _, _, message in served)
    _same_calls(worker, losses, helper)


def test_a_save_keeps_the_saved_buffers_index_and_drops_the_others(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    losses, train = tmp_path / "losses.py", tmp_path / "train.py"
    losses.write_text(LOSSES)
    train.write_text(TRAIN)
    worker = _served_worker(tmp_path, losses)
    facts = worker.projects.of(str(losses))
    assert facts is not None
    finalized, linted = [], []
    real_finalize, real_lint = ProjectIndex.finalize, engine.lint_text
    monkeypatch.setattr(ProjectIndex, "finalize", lambda self: finalized.append(1) or real_finalize(self))
    monkeypatch.setattr(engine, "lint_text", lambda *a, **k: linted.append(a[0]) or real_lint(*a, **k))
    read, real_read = [], facts_module.index_file
    monkeypatch.setattr(facts_module, "index_file", lambda path, text: read.append(path) or real_read(path, text))
    # both buffers open, each edited (lines above) and linted
    train_text = "# a note\n" + TRAIN_CHANGED
    served, fresh = _lint(worker, tmp_path, train, train_text)
    assert served == fresh
    losses_text = "# a note\n" + LOSSES
    served, fresh = _lint(worker, tmp_path, losses, losses_text)
    assert served == fresh and any("train.py:8" in message for _, _, _, message in served)
    # train.py's buffer is saved (its caller passes a plain number now), then linted again, as the
    # editor does: its facts are those its last lint read, its own index is kept and its last
    # findings answer
    train.write_text(train_text)
    read.clear()
    worker.handle(messages.Saved(str(train), train_text))
    kept = facts._made[str(train)][3]
    finalized.clear(), linted.clear()
    again = worker.answer(messages.Lint(str(train), train_text, 60.0))
    assert isinstance(again, messages.Linted)
    assert facts.index_for(str(train), train_text) is kept and finalized == [] and linted == [] and read == []
    # losses.py's index read train.py's facts as they were: it goes, and its findings follow the save
    served, fresh = _lint(worker, tmp_path, losses, losses_text)
    assert served == fresh and not any("train.py" in message for _, _, _, message in served)
    assert finalized and str(losses) in linted
    # a save that changes no fact (a comment) leaves every kept index as it was
    made = {path: entry[3] for path, entry in facts._made.items()}
    generation = facts.generation
    train.write_text(train_text + "# saved\n")
    worker.handle(messages.Saved(str(train), train_text + "# saved\n"))
    assert facts.generation == generation
    assert facts.index_for(str(losses), losses_text) is made[str(losses)]
    assert facts.index_for(str(train), train_text) is made[str(train)]
    # a save of another text than the one last linted (the editor saved a later version): its
    # facts are read from the text saved
    train.write_text(TRAIN)
    worker.handle(messages.Saved(str(train), TRAIN))
    served, fresh = _lint(worker, tmp_path, losses, losses_text)
    assert served == fresh and any("train.py:8" in message for _, _, _, message in served)


def test_the_last_findings_answer_only_the_same_text_rules_and_index(tmp_path, monkeypatch):
    """A text linted again gets its last findings only while the index is the very one it was linted
    with: the same text after another file changed on disk is linted again, to new findings."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    losses, train = tmp_path / "losses.py", tmp_path / "train.py"
    losses.write_text(LOSSES)
    train.write_text(TRAIN)
    worker = _served_worker(tmp_path, losses)
    first, fresh = _lint(worker, tmp_path, losses, LOSSES)
    assert first == fresh and any("train.py:8" in message for _, _, _, message in first)
    train.write_text(TRAIN_CHANGED)
    worker.handle(messages.Saved(str(train), TRAIN_CHANGED))
    second, fresh = _lint(worker, tmp_path, losses, LOSSES)
    assert second == fresh and second != first
    # another file's rules: a file excluded from TNL201 by per-file-ignores gets no TNL201
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.torchnumlint.per-file-ignores]\n"losses.py" = ["TNL201"]\n')
    third, fresh = _lint(worker, tmp_path, losses, LOSSES)
    assert third == fresh and not any(code == "TNL201" for _, _, code, _ in third)


def test_random_real_edits_keep_the_call_sites_and_findings_of_a_whole_lint(tmp_path):
    """Edits drawn at random on real torch files (each with a rule example) beside the callers'
    project, with a file saved in between: after each, the buffer's findings are a fresh whole
    run's and the kept call table lists the call sites a fresh `Summaries` indexes."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.torchnumlint]\nstrict = true\n')
    (tmp_path / "losses.py").write_text(LOSSES)
    (tmp_path / "train.py").write_text(TRAIN)
    for number, (path, text) in enumerate(real_texts(4)):
        (tmp_path / f"f{number}_{Path(path).name}").write_text(text)
    buffers = sorted(tmp_path.glob("*.py"))
    worker = _served_worker(tmp_path, buffers[0])
    rng = random.Random(6)
    last = {}
    for step in range(12):
        buffer = rng.choice(buffers)
        if step == 6:  # a buffer saved: its index stays, the others' go
            saved = rng.choice(buffers)
            text = last.get(saved, saved.read_text())
            saved.write_text(text)
            worker.handle(messages.Saved(str(saved), text))
        edit = rng.choice(real_edits.MOVES + real_edits.CHANGES)
        text = edit(last.get(buffer, buffer.read_text()), rng)
        if text is None:
            continue
        served, fresh = _lint(worker, tmp_path, buffer, text)
        assert served == fresh, (step, edit, buffer)
        _same_calls(worker, buffer, text)
        last[buffer] = text


# a function handed on (`handed_run(handed_kl, ...)`): `handed_kl`'s finding depends on the call in
# `handed_run`, which names neither it nor its caller; only `handed_go`, which names both, links them
HANDED = textwrap.dedent(
    """\
    import torch.nn.functional as F


    def handed_kl(p, q):
        return F.kl_div(p, q, reduction="batchmean")


    def handed_run(loss_fn, x, y):
        return loss_fn(x.softmax(-1), y)


    def handed_go(x, y):
        return handed_run(handed_kl, x, y)
    """
)
BIG = 40_000, 100_000  # the sizes of the real files edited below


def _big_torch_files(count):
    """`count` files of the installed torch of 40-100 KB, spread over them (a fixed choice)."""
    top = os.path.dirname(torch.__file__)
    files = sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(top)
        for name in names
        if name.endswith(".py") and BIG[0] <= os.path.getsize(os.path.join(folder, name)) <= BIG[1]
    )
    step = max(1, len(files) // count)
    return files[step // 2 :: step][:count]


def _call_typed(text, rng):
    """A call of `normalise` typed in a function drawn at random: its callers' evidence changes."""
    lines = text.split("\n")
    found = [
        node.body[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "normalise" and node.body[0].lineno > node.lineno
    ]
    first = rng.choice(found)
    typed = " " * first.col_offset + "edited_count = normalise(torch.ones(3), (torch.ones(3) > 0).sum())"
    return "\n".join(lines[: first.lineno - 1] + [typed] + lines[first.lineno - 1 :])


def _handed_toggled(text, rng):
    """What `handed_run` passes its loss switched between a softmax and a log-softmax (one line)."""
    if "x.softmax(-1), y)" in text:
        return text.replace("loss_fn(x.softmax(-1), y)", "loss_fn(x.log_softmax(-1), y)")
    return text.replace("loss_fn(x.log_softmax(-1), y)", "loss_fn(x.softmax(-1), y)")


def _line_removed(text, rng):
    """A one-line statement removed from a function drawn at random (not its only one)."""
    lines = text.split("\n")
    found = [
        stmt
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.body) > 1
        for stmt in node.body[1:]
        if stmt.lineno == stmt.end_lineno and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
    ]
    for _ in range(20):
        stmt = rng.choice(found)
        edited = "\n".join(lines[: stmt.lineno - 1] + lines[stmt.lineno :])
        if real_edits.parses(edited):
            return edited
    return None


UNUSED_IMPORT = "from torch.cuda.amp import autocast as old_autocast\n"  # TNL306 says "unused here" while it is
USE = "edited_use = old_autocast"


def _use_toggled(text, rng):
    """The one use of `old_autocast` added in a function drawn at random, or removed: the import's
    finding changes, although the import is not edited."""
    if USE in text:
        return "\n".join(line for line in text.split("\n") if line.strip() != USE)
    found = [
        node.body[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body[0].lineno > node.lineno
    ]
    first = rng.choice(found)
    lines = text.split("\n")
    return "\n".join(lines[: first.lineno - 1] + [" " * first.col_offset + USE] + lines[first.lineno - 1 :])


NARROWING_EDITS = real_edits.MOVES + real_edits.CHANGES + (_call_typed, _handed_toggled, _line_removed, _use_toggled)


def _callers_file(buffers, plain):
    """Another file of the project calling each buffer's `normalise`: with a count (evidence for
    its division), or with a plain number."""
    lines = ["import torch", ""]
    for number, buffer in enumerate(buffers):
        lines.append(f"from {buffer.stem} import normalise as normalise_{number}")
    for number, _ in enumerate(buffers):
        argument = "4.0" if plain else "(x > 0.5).sum()"
        lines += ["", "", f"def step_{number}(x):", f"    return normalise_{number}(x, {argument})"]
    return "\n".join(lines) + "\n"


def _exact(findings):
    """Everything a finding says, its fix and noqa lines included, in a stable order."""
    return sorted((f.line, f.col, f.end_line, f.end_col, f.code, f.message, repr(f.fix), f.noqa_lines) for f in findings)


def _opened(tmp_path, buffers, callers):
    """A served worker with `buffers` opened (each linted whole) beside a file calling their
    functions: (the worker, the buffers' project facts, the rules, each buffer's text)."""
    callers.write_text(_callers_file(buffers, plain=False))
    worker = _served_worker(tmp_path, buffers[0])
    facts = worker.projects.of(str(buffers[0]))
    assert facts is not None
    last = {buffer: buffer.read_text() for buffer in buffers}
    for buffer in buffers:
        worker.answer(messages.Lint(str(buffer), last[buffer], 60.0))
    return worker, facts, Settings().rules_for(str(buffers[0])), last


def _served_as_whole(worker, facts, rules, buffer, text, label, strict=True):
    """The server's findings for `text` in `buffer`, held equal to a whole lint of it; the whole lint's."""
    served = worker.answer(messages.Lint(str(buffer), text, 60.0))
    assert isinstance(served, messages.Linted), served
    whole = engine.lint_text(str(buffer), text, rules, facts.index_for(str(buffer), text), strict=strict)
    assert _exact(served.findings) == _exact(whole), label
    return whole


def test_random_real_edits_of_big_files_narrowed_give_the_whole_buffers_findings(tmp_path):
    """Edits drawn at random on real 40-100 KB torch files (with rule examples, a function whose
    divisor only its callers show, and a function handed on): the server lints again only what
    each edit can reach (`relint_scope.py`) and carries the rest over, and its findings are those of
    a whole lint of the buffer with the same project facts, fixes and noqa lines included."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.torchnumlint]\nstrict = true\n')
    (tmp_path / "losses.py").write_text(LOSSES)
    (tmp_path / "train.py").write_text(TRAIN)
    buffers = []
    for number, path in enumerate(_big_torch_files(3)):
        text = read_source(path).text
        for example in EXAMPLES[number::9] + [UNUSED_IMPORT]:  # a dozen rule examples in each
            text = with_example(text, example)
        buffer = tmp_path / f"big{number}_{Path(path).name}"
        buffer.write_text(text + "\n\n" + LOSSES.replace("import torch\n", "") + "\n\n" + HANDED)
        buffers.append(buffer)
    callers = tmp_path / "callers.py"
    worker, facts, rules, last = _opened(tmp_path, buffers, callers)
    rng = random.Random(22)
    carried = 0
    for step in range(36):
        buffer = rng.choice(buffers)
        edit = rng.choice(NARROWING_EDITS)
        if step % 6 == 5:
            # the other file's calls change on disk: the buffers' `normalise` lose or gain their
            # evidence, which only the project facts show; then an edit that moves no line
            plain = "4.0)" not in callers.read_text()
            callers.write_text(_callers_file(buffers, plain))
            worker.handle(messages.Saved(str(callers), callers.read_text()))
            edit = _handed_toggled
        text = edit(last[buffer], rng)
        if text is None:
            continue
        narrowed = worker.relinter.narrowed
        _served_as_whole(worker, facts, rules, buffer, text, (step, edit.__name__, buffer.name))
        if worker.relinter.narrowed > narrowed:
            carried += worker.relinter.carried
        last[buffer] = text
    # the mechanism ran: edits were narrowed, and findings carried over (the others: an edit that
    # moved lines under findings citing lines, or changed the facts their lint asked about)
    assert worker.relinter.narrowed >= 5 and carried > 0


def _snapshot(text):
    return Snapshot(text, ast.parse(text))


def test_the_edit_region_is_whole_lines_and_its_scope_the_statements_linked_to_it():
    text = LOSSES + HANDED
    # a comment between statements: nothing to lint, every finding carried
    commented = text.replace("\n\nclass Reducer", "\n# a note\n\nclass Reducer")
    assert region(text, commented) == Region(7, 7, 8)
    scope = plan(_snapshot(text), _snapshot(commented), [])
    assert scope is not None and scope.masked is None
    # a character typed in `handed_run`: it, `handed_go` (its caller) and `handed_kl` (handed on
    # by `handed_go`) are linted again; `normalise`, `Reducer` and `use` are masked
    typed = text.replace("x.softmax(-1), y)", "x.softmax(-2), y)")
    at = text.index("x.softmax(-1)")
    line = text.count("\n", 0, at) + 1
    assert region(text, typed) == Region(line, line + 1, line + 1)
    scope = plan(_snapshot(text), _snapshot(typed), [])
    assert scope is not None and scope.masked is not None
    new = _snapshot(typed)
    kept = sorted(new.text[new.parts[i].span[0] :].split("(")[0] for i in scope.kept)
    assert kept == ["def handed_go", "def handed_kl", "def handed_run"]
    assert len(scope.masked) == 3
    # an edit of module-level code, or lines broken by a lone carriage return: the whole buffer
    assert plan(_snapshot(text), _snapshot(text.replace("import torch\n", "import torch  # x\n", 1)), []) is None
    crs = text.replace("\n", "\r")
    assert plan(_snapshot(crs), _snapshot(crs.replace("x.softmax(-1)", "x.softmax(-2)")), []) is None


MADE = "import torch\n\n\ndef made_probs(x):\n    return x.softmax(-1)\n"  # another file's helper
MADE_PLAIN = MADE.replace("x.softmax(-1)", "x * 2")
USES_MADE = textwrap.dedent(
    """\
    import torch.nn.functional as F

    from made import made_probs


    def made_into_cross_entropy(x, y):
        return F.cross_entropy(made_probs(x), y)


    def made_log(x):
        return made_probs(x).log()
    """
)


def _at_made(findings, text):
    """How many findings are on the lines that call the other file's helper."""
    lines = {number for number, line in enumerate(text.split("\n"), 1) if "made_probs(" in line}
    return sum(finding.line in lines for finding in findings)


def _script(text):
    """`text` made a script: a `main()` calling every module-level function of it, and an
    `if __name__` block calling `main()` (so every function is linked to every other by name,
    through `main`, as in a training script)."""
    names = [node.name for node in ast.parse(text).body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    calls = [f"    outputs.append({name}(batch))" for name in names]
    main = [
        "def main(batch):",
        "    outputs = []",
        *calls,
        "    return outputs",
        "",
        "",
        'if __name__ == "__main__":',
        "    main(torch.ones(3))",
    ]
    return text + "\n\n" + "\n".join(main) + "\n"


def _script_helper_used(text, rng):
    """A helper returning a softmax (a name drawn at random) added before `main`, and `main` taking
    the log of what it returns: `main`'s finding depends on the new helper's facts."""
    number = rng.randrange(1000)
    helper = f"def script_helper_{number}(x):\n    return x.softmax(-1)\n\n\n"
    use = f"    outputs.append(script_helper_{number}(batch).log())\n"
    at = text.index("def main(batch):")
    edited = text[:at] + helper + text[at:]
    return edited.replace("    return outputs\n", use + "    return outputs\n", 1)


def _script_helper_renamed(text, rng):
    """A helper added before renamed, where it is defined and where `main` calls it."""
    found = sorted(set(re.findall(r"script_helper_\d+", text)))
    if not found:
        return None
    old = rng.choice(found)
    return re.sub(rf"\b{old}\b", f"{old}_{rng.randrange(10)}", text)


def _kind_swapped(text, rng):
    """A helper's softmax made a log-softmax, or back (one line): a log of it is a finding, or not."""
    found = [m.start() for m in re.finditer(r"return x\.(log_)?softmax\(-1\)", text)]
    if not found:
        return None
    at = rng.choice(found)
    end = text.index("\n", at)
    line = text[at:end]
    swapped = line.replace("log_softmax", "softmax") if "log_softmax" in line else line.replace("softmax", "log_softmax")
    return text[:at] + swapped + text[end:]


END = "\n\n# helper at the end\n"


def _helper_at_end(text, rng):
    """A helper (a name and a kind drawn at random) at the end of the file, in place of the one
    there: a name that no other statement holds becomes a producer, the last one no longer is."""
    kind = rng.choice(["x.softmax(-1)", "x.sigmoid()", "x.log_softmax(-1)", "x * 2"])
    helper = f"{END}def end_helper_{rng.randrange(1000)}(x):\n    return {kind}\n"
    return text.split(END)[0] + helper


SCRIPT_EDITS = (
    real_edits.inside_function,
    _call_typed,
    _handed_toggled,
    _line_removed,
    real_edits.comment_anywhere,
    _script_helper_used,
    _script_helper_renamed,
    _kind_swapped,
    _helper_at_end,
    _helper_at_end,
)


def test_random_edits_of_a_script_whose_main_calls_everything_give_a_whole_lints_findings(tmp_path):
    """Lines typed inside functions and helpers added, renamed or changed in real big files made
    scripts (`main()` calls every function, an `if __name__` block calls `main`), and another
    file's helper switched between a softmax and a plain product on disk: whatever the server
    narrows the lint to, its findings after each edit are a whole lint's of the buffer, with the
    same project facts. The edits a narrower scope must get right are here: a helper's softmax
    whose log `main` takes (`main` reads the helper's facts), a call typed in a function that
    `main` calls (its callees' parameters are judged from their callers), a function handed on by
    `handed_go` (`handed_kl`'s finding reads `handed_run`'s body), a helper at the end that
    nothing names, replaced (what the words of the buffer produce changes: `kept_words.py`), and
    the other file's helper, whose kind the carried findings read."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.torchnumlint]\nstrict = true\n')
    (tmp_path / "losses.py").write_text(LOSSES)
    made = tmp_path / "made.py"
    made.write_text(MADE)
    buffers = []
    for number, path in enumerate(_big_torch_files(2)):
        text = read_source(path).text
        for example in EXAMPLES[number::12]:
            text = with_example(text, example)
        # the first with a method whose callers are in the buffer (their file's facts change with
        # any helper added: its carried findings are not replayed then)
        losses = LOSSES.replace("import torch\n", "") if number == 0 else ""
        text = text + "\n\n" + losses + "\n\n" + HANDED + "\n\n" + USES_MADE
        buffer = tmp_path / f"script{number}_{Path(path).name}"
        buffer.write_text(_script(text))
        buffers.append(buffer)
    callers = tmp_path / "callers.py"
    worker, facts, rules, last = _opened(tmp_path, buffers, callers)
    rng = random.Random(8)
    kinds, narrowed, made_findings = set(), 0, set()
    for step in range(40):
        buffer = rng.choice(buffers)
        edit = SCRIPT_EDITS[step % len(SCRIPT_EDITS)] if step < 2 * len(SCRIPT_EDITS) else rng.choice(SCRIPT_EDITS)
        if step % 5 == 4:  # the other file's helper changes on disk, then a helper at the end
            made.write_text(MADE_PLAIN if made.read_text() == MADE else MADE)
            worker.handle(messages.Saved(str(made), made.read_text()))
            edit = _helper_at_end
        text = edit(last[buffer], rng)
        if text is None:
            continue
        before = worker.relinter.narrowed
        whole = _served_as_whole(worker, facts, rules, buffer, text, (step, edit.__name__, buffer.name))
        kinds.add(edit.__name__)
        narrowed += worker.relinter.narrowed - before
        made_findings.add(_at_made(whole, text))
        last[buffer] = text
    # every kind of edit was met, some were narrowed, and the other file's helper moved findings
    assert kinds == {edit.__name__ for edit in SCRIPT_EDITS}
    assert narrowed >= 2 and len(made_findings) > 1


def test_findings_carried_past_a_helper_at_the_end_read_what_their_words_produce(tmp_path):
    """A real big file with a function taking the log of another file's helper, which switches
    between a softmax and a plain product on disk, and helpers replaced at the end of the buffer.
    Where that helper gives no softmax, no rule looks at the function (its code names no softmax:
    `candidates` masks it), so the one record its findings hold of the helper is the question
    which words of the buffer name a producer: narrowed to the words of the statements carried
    over (`kept_words.py`), it must still hold the helper's name. Only the rule on a log of a
    softmax is selected: another rule whose text test the function passes (a `log`) would ask
    what the helper gives, which the replay would read too."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[tool.torchnumlint]\nselect = ["TNL103"]\n')
    made = tmp_path / "made.py"
    made.write_text(MADE_PLAIN)
    buffer = tmp_path / "big.py"
    text = (
        read_source(_big_torch_files(1)[0]).text + "\n\nfrom made import made_probs\n\n\ndef made_log(x):\n    return made_probs(x).log()\n"
    )
    buffer.write_text(text)
    worker = _served_worker(tmp_path, buffer)
    facts = worker.projects.of(str(buffer))
    assert facts is not None
    rules = Settings().rules_for(str(buffer))
    rng = random.Random(3)
    worker.answer(messages.Lint(str(buffer), text, 60.0))
    narrowed, seen = worker.relinter.narrowed, set()
    for step in range(8):
        if step % 2:  # the other file's helper changes on disk
            made.write_text(MADE_PLAIN if made.read_text() == MADE else MADE)
            worker.handle(messages.Saved(str(made), made.read_text()))
        text = _helper_at_end(text, rng)
        whole = _served_as_whole(worker, facts, rules, buffer, text, step, strict=False)
        seen.add(_at_made(whole, text))
    # the log of the helper's softmax was a finding, then not; the helpers' edits were narrowed
    assert seen == {0, 1} and worker.relinter.narrowed - narrowed >= 2
