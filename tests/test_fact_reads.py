"""Fine-grained invalidation (`fact_reads.py`): a cached result that read the project facts is
reused after an edit unless a question it asked of them has another answer now; whatever the
recorder does not wrap is read whole (valid only under the whole fingerprint)."""

from pathlib import Path

from tests.test_cache import lint, linted, project  # noqa: F401 (a fixture)
from torchnumlint.config import Settings
from torchnumlint.fact_reads import Replay, recording
from torchnumlint.index import build_index
from torchnumlint.runner import Options, run

HELPERS = "import torch\n\n\ndef scale(x):\n    return x * 2\n"
LOSS = "import torch\nfrom helpers import probs\n\n\ndef loss(z):\n    return torch.log(probs(z))\n"
OTHER = "import torch\n\n\ndef entropy(p):\n    return -(p * torch.log(p)).sum()\n"


def _answer(result):
    return [(Path(f.path).name, f.line, f.code) for f in result.findings], result.errors


def test_an_added_helper_relints_the_files_that_name_it_and_no_other(tmp_path, linted):  # noqa: F811
    folder = project(tmp_path, helpers=HELPERS, loss=LOSS, other=OTHER)
    assert [code for _, _, code in _answer(lint(folder))[0] if code == "TNL103"] == []
    (folder / "helpers.py").write_text(HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n")
    linted.clear()
    warm = lint(folder)
    assert sorted(linted) == ["helpers.py", "loss.py"]  # other.py names no `probs`: its answers hold
    assert ("loss.py", 6, "TNL103") in _answer(warm)[0]
    assert _answer(warm) == _answer(run([str(folder)], Settings(), options=Options(cache=False)))
    linted.clear()
    assert _answer(lint(folder)) == _answer(warm) and linted == []  # stored again under the new fingerprint


def test_a_helper_that_changes_kind_relints_its_callers(tmp_path, linted):  # noqa: F811
    folder = project(tmp_path, helpers=HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n", loss=LOSS, other=OTHER)
    assert ("loss.py", 6, "TNL103") in _answer(lint(folder))[0]
    (folder / "helpers.py").write_text(HELPERS + "\n\ndef probs(z):\n    return torch.tanh(z)\n")
    linted.clear()
    warm = lint(folder)
    assert "loss.py" in linted and "other.py" not in linted
    assert _answer(warm) == _answer(run([str(folder)], Settings(), options=Options(cache=False)))
    assert ("loss.py", 6, "TNL103") not in _answer(warm)[0]


def test_the_recorded_questions_replay_and_an_unwrapped_read_is_whole(tmp_path):
    helpers = str(tmp_path / "helpers.py")
    index = build_index([(helpers, HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n")])
    view = recording(index)()
    assert view.summaries.mentions_producer("y = probs(x)", frozenset({"softmax"}))
    assert view.lookup("Model", None, helpers) is None and not view.has_scaler()
    reads = view.recorder.reads()
    assert reads is not None and {question[0] for question, _ in reads} == {"lookup", "has_scaler", "producers"}
    same = Replay(build_index([(helpers, HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n\n# note\n")]), lambda path: None)
    assert same.still_valid(reads)
    other = Replay(build_index([(helpers, HELPERS + "\n\ndef probs(z):\n    return torch.tanh(z)\n")]), lambda path: None)
    assert not other.still_valid(reads)
    assert view.classes == index.classes and view.recorder.reads() is None  # read whole


def test_whether_a_callee_runs_without_grad_is_a_recorded_question(tmp_path):
    """`callee_no_grad` (a helper decorated `@torch.no_grad()` returns no gradient) is asked by the
    gradient rules; read whole, it kept every file that asked it on the whole fingerprint (kornia:
    6 files re-linted after any edit that changed a fact)."""
    helpers, user = str(tmp_path / "helpers.py"), str(tmp_path / "user.py")
    use = "import torch\nfrom helpers import post\n\n\ndef f(x):\n    return post(x)\n"
    without_grad = "import torch\n\n\n@torch.no_grad()\ndef post(x):\n    return x\n"
    view = recording(build_index([(helpers, without_grad), (user, use)]))()
    assert view.summaries.callee_no_grad(user, None, ("fn", "post"))
    reads = view.recorder.reads()
    assert reads is not None and [question[0] for question, _ in reads] == ["callee_no_grad"]
    assert Replay(build_index([(helpers, without_grad + "\n# note\n"), (user, use)]), lambda path: None).still_valid(reads)
    with_grad = without_grad.replace("@torch.no_grad()\n", "")
    assert not Replay(build_index([(helpers, with_grad), (user, use)]), lambda path: None).still_valid(reads)


def test_which_class_an_instance_is_is_a_recorded_question(tmp_path):
    helpers, user = str(tmp_path / "helpers.py"), str(tmp_path / "user.py")
    use = "import torch\nfrom helpers import Head\n\nhead = Head()\n"
    head = "import torch\n\n\nclass Head(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    view = recording(build_index([(helpers, head), (user, use)]))()
    assert view.summaries.instance_class(user, None, ("new", "Head")) == (helpers, "Head")
    reads = view.recorder.reads()
    assert reads is not None and [question[0] for question, _ in reads] == ["instance_class"]
    assert Replay(build_index([(helpers, head + "\n# note\n"), (user, use)]), lambda path: None).still_valid(reads)
    assert not Replay(build_index([(helpers, "import torch\n"), (user, use)]), lambda path: None).still_valid(reads)


def test_every_question_rules_ask_of_the_summaries_is_recorded():
    """A public `Summaries` method the recorder does not wrap is read whole, which silently keeps
    every file that asks it on the whole fingerprint: a new question must be wrapped (and replayed
    by `fact_reads._ask`), or be one rules never ask (building, merging, the recorder's own)."""
    from torchnumlint.fact_reads import _RecordingSummaries
    from torchnumlint.summaries import Summaries

    public = {name for name, value in vars(Summaries).items() if callable(value) and not name.startswith("_")}
    not_asked_by_rules = {"absorb", "without", "keep_answers", "use_calls", "producer_names", "producers_among"}
    assert public - not_asked_by_rules <= set(vars(_RecordingSummaries))


def test_one_replay_judges_many_files_as_a_fresh_replay_judges_each(tmp_path):
    """A replay keeps the base frame's answers across the files it judges (`Replay._base_answers`,
    `_base_producers`): each file's verdict must be the one a replay of its own would give."""
    helpers, models = str(tmp_path / "helpers.py"), str(tmp_path / "models.py")
    model = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n"
    old = build_index([(helpers, HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n"), (models, model)])
    texts = ["y = probs(x)", "y = scale(x)", "y = logits(x) + probs(x)", "y = scale(probs(x))", "y = gate(x)"]
    reads = []
    for at, text in enumerate(texts):
        view = recording(old)()
        view.summaries.mentions_producer(text, frozenset({"softmax"}))
        view.summaries.mentions_producer(text, frozenset({"sigmoid"}))
        view.lookup("Model" if at % 2 else "Other", None, helpers)
        view.function("probs" if at < 3 else "scale", None, helpers)
        found = view.recorder.reads()
        assert found is not None
        reads.append(found)
    edits = [
        HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n\n# note\n",
        HELPERS + "\n\ndef probs(z):\n    return torch.tanh(z)\n",
        HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n\n\ndef logits(z):\n    return torch.sigmoid(z)\n",
        HELPERS + "\n\ndef probs(z):\n    return torch.softmax(z, -1)\n\n\ndef gate(z):\n    return z.softmax(-1)\n",
    ]
    verdicts = set()
    for edit in edits:
        for classes in (model, model.replace("class Model", "class Other")):
            new = build_index([(helpers, edit), (models, classes)])
            shared = Replay(new, lambda path: None)
            for found in reads + reads[::-1]:
                fresh = Replay(new, lambda path: None).still_valid(found)
                assert shared.still_valid(found) == fresh
                verdicts.add(fresh)
        if edit == edits[0]:  # a comment added: every answer holds
            assert all(Replay(build_index([(helpers, edit), (models, model)]), lambda path: None).still_valid(found) for found in reads)
    assert verdicts == {True, False}  # the edits keep some files' answers and change others'
