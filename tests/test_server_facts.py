"""The lint process keeps the project's index, and what the summaries worked out about producers,
across an editor's changes (`server/facts.py`, `Summaries.keep_answers`); this must never change a
finding. A buffer is linted through the lint process's own path (`_Worker.answer`, the facts kept
in memory) after each edit of a sequence, and compared with a fresh whole run without the cache
over the project as it would be on disk with the buffer saved: lines inserted above (every
position moves), a call typed inside a function, a helper of the buffer whose return kind changes,
another file changed on disk (the editor says so: `Saved`), and positions moving again after that.
"""

import random
import textwrap
from pathlib import Path

from tests import real_edits
from tests.real_code import real_texts
from tests.test_same_findings import _project

from torchnumlint.config import Settings
from torchnumlint.index import ProjectIndex
from torchnumlint.rules.registry import all_rules
from torchnumlint.runner import Options, run
from torchnumlint.server import messages
from torchnumlint.server.worker import _Worker
from torchnumlint.summaries import Summaries

HEADS = textwrap.dedent(
    """\
    import torch


    def probs(logits):
        return torch.softmax(logits, dim=-1)


    class Head(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)
    """
)
# the other file changed on disk: `probs` no longer gives a softmax, `Head` now gives one
HEADS_CHANGED = HEADS.replace("torch.softmax(logits, dim=-1)", "logits * 2").replace("torch.sigmoid(x)", "x.softmax(-1)")
TRAIN = textwrap.dedent(
    """\
    import torch

    from heads import Head, probs


    def local_probs(x):
        return torch.softmax(x, dim=-1)


    def scale(t, factor):
        return t * factor


    def loss(z, y):
        head = Head()
        out = torch.log(probs(z)).mean()
        gated = torch.log(head(y))
        return out + torch.log(local_probs(y)).sum() + gated.sum() + scale(z, probs(z)).sum()
    """
)


class _Pipe:
    """The lint process's end of its pipe, as far as gathering the facts speaks on it."""

    def __init__(self) -> None:
        self.said: list = []

    def send(self, message: object) -> None:
        self.said.append(message)


def _edits():
    """(what, the buffer's text, the other file's text on disk) at each step."""
    moved = "# a note\n" + TRAIN
    typed = moved.replace("    head = Head()\n", "    head = Head()\n    extra = probs(torch.sigmoid(y))\n")
    helper_changed = typed.replace("return torch.softmax(x, dim=-1)", "return x.exp()")
    assert moved != typed != helper_changed
    yield "as opened", TRAIN, HEADS
    yield "lines inserted above", moved, HEADS
    yield "a call typed inside a function", typed, HEADS
    yield "a helper of the buffer returns another kind", helper_changed, HEADS
    yield "another file changed on disk", helper_changed, HEADS_CHANGED
    yield "positions moved after that", "# one\n# two\n" + helper_changed, HEADS_CHANGED
    yield "the buffer's helper as it was", "# one\n# two\n" + typed, HEADS_CHANGED


def _producer_answers(summaries: Summaries):
    """What `summaries` says of every producer name for every kind a rule reads (the pre-filter's
    question, `mentions_producer`): a kept answer that went stale shows here even where the
    buffer's own text made the rule a candidate anyway."""
    kinds = {rule.produced for rule in all_rules() if rule.produced}
    return {(kind, name): summaries.mentions_producer(name, kind) for kind in kinds for name in sorted(summaries.producer_names())}


def _found(findings, path: Path):
    return sorted((f.line, f.col, f.code, f.message) for f in findings if Path(f.path).resolve() == path.resolve())


def test_kept_facts_and_answers_give_a_fresh_whole_lints_findings_after_each_edit(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    heads, train = tmp_path / "heads.py", tmp_path / "train.py"
    heads.write_text(HEADS)
    train.write_text(TRAIN)
    worker = _Worker(_Pipe())  # type: ignore[arg-type]
    facts = worker.projects.of(str(train))
    assert facts is not None
    while not facts.complete:
        worker.gather(facts)
    answers = []
    for what, text, other in _edits():
        if heads.read_text() != other:
            heads.write_text(other)
            worker.handle(messages.Saved(str(heads), other))
        served = worker.answer(messages.Lint(str(train), text, 60.0))
        assert isinstance(served, messages.Linted), (what, served)
        train.write_text(text)  # the fresh run reads the buffer from disk
        fresh = run([str(tmp_path)], Settings(), options=Options(cache=False))
        assert not fresh.errors
        assert _found(served.findings, train) == _found(fresh.findings, train), what
        kept = facts.index_for(str(train), text).summaries
        assert _producer_answers(kept) == _producer_answers(Summaries(dict(kept.files))), what
        answers.append(kept)
    # the sequence reaches what it is meant to test: findings that depend on the other file, and
    # answers kept across the edits that leave the names of the buffer's summary as they were
    codes = [code for _, _, code, _ in _found(served.findings, train)]
    assert "TNL103" in codes
    assert answers[1]._producers is answers[0]._producers  # lines inserted above
    assert answers[2]._producers is answers[1]._producers  # a call typed
    assert answers[3]._producers is not answers[2]._producers  # a helper's kind changed
    assert answers[5]._producers is answers[4]._producers


def test_random_real_edits_of_a_buffer_map_the_last_index_and_keep_the_findings(tmp_path, monkeypatch):
    """Edits drawn at random on buffers of the YOLO-like model (its modules are reached from the
    fp16 region of `train.py` through the builder of `models/yolo.py`) and of real torch files,
    with another file saved in between: the server's findings for the buffer after each are a fresh
    whole run's, and an edit that moves the buffer's lines only is answered from the last index,
    mapped (`moves.moved_index`), without finalizing the project's facts again."""
    root = _project(tmp_path)
    (root / "pyproject.toml").write_text("[tool.torchnumlint]\nstrict = true\n")  # the findings a region's reach gives
    (root / "torch_files").mkdir()
    for number, (path, text) in enumerate(real_texts(4)):
        (root / "torch_files" / f"f{number}_{Path(path).name}").write_text(text)
    worker = _Worker(_Pipe())  # type: ignore[arg-type]
    common = root / "models" / "common.py"
    facts = worker.projects.of(str(common))
    assert facts is not None
    while not facts.complete:
        worker.gather(facts)
    finalized = []
    real = ProjectIndex.finalize
    monkeypatch.setattr(ProjectIndex, "finalize", lambda self: finalized.append(1) or real(self))
    rng = random.Random(22)
    buffers = [common, root / "models" / "yolo.py", root / "train.py"] + sorted((root / "torch_files").iterdir())
    last = {}  # buffer -> its text at its last answer
    mapped = cross_file = 0
    for step in range(16):
        buffer = common if step % 3 else rng.choice(buffers)
        if step == 9:  # another file saved: its facts change, every kept index goes
            other = root / "train.py"
            other.write_text("# saved\n" + other.read_text())
            worker.handle(messages.Saved(str(other), other.read_text()))
        edit = rng.choice(real_edits.CHANGES) if step % 5 == 4 else rng.choice(real_edits.MOVES)
        text = edit(last.get(buffer, buffer.read_text()), rng)
        if text is None:
            continue
        kept = facts._made.get(str(buffer))  # the index of the buffer's last answer, if one was made
        finalized.clear()
        served = worker.answer(messages.Lint(str(buffer), text, 60.0))
        finals = len(finalized)
        assert isinstance(served, messages.Linted), (step, served)
        before = buffer.read_text()
        buffer.write_text(text)  # the fresh run reads the buffer from disk
        fresh = run([str(root)], Settings(), options=Options(cache=False))
        buffer.write_text(before)  # the buffer is not saved: on disk the file is as it was
        assert not fresh.errors
        assert _found(served.findings, buffer) == _found(fresh.findings, buffer), (step, edit, buffer)
        if edit in real_edits.MOVES and kept is not None and kept[0] == facts.generation:
            assert finals == 0, (step, edit, buffer)
            mapped += 1
        last[buffer] = text
        cross_file += sum("models/yolo.py:" in f.message for f in served.findings)
    assert mapped >= 5 and cross_file >= 10
