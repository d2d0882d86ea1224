"""The seed's story (issue 20 item 3): a prompt-tuning run whose KL target, named
`teacher_logits` but computed by the same prompted model, underflows. The first run names the
step, the parameter and the line that called backward; replaying the step names the operation
whose backward made the NaN (the KL, in a helper file), with its line, and lints every project
file from the loss down to it."""

import pytest
import torch

from torchnumlint.runtime_check import NonFiniteError, nan_watch
from torchnumlint.runtime_check.watch_report import static_findings
from tests.runtime_check import kl_helpers
from tests.runtime_check import prompt_tuning as pt


def _line_of(text, path):
    lines = open(path).read().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


KL_LINE = f"kl_helpers.py:{_line_of('return F.kl_div', kl_helpers.__file__)}"


def _run_and_replay(**options):
    model = pt.PromptedEncoder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    clean, augmented = pt.views()
    with nan_watch(model, **options) as watch:
        with pytest.raises(NonFiniteError) as info:
            pt.train_step(model, optimizer, clean, augmented)
        replayed = watch.replay(pt.train_step, model, optimizer, clean, augmented)
    return model, info.value.report, replayed


def test_the_incident_names_the_step_the_parameter_and_how_to_replay():
    model, first, _ = _run_and_replay()
    assert (first.phase, first.kind, first.step) == ("backward", "nan", 0)
    assert first.nonfinite_grads == ["prompt_embeddings"]
    assert first.loss_site.endswith(f"prompt_tuning.py:{_line_of('loss.backward()', pt.__file__)}")
    assert first.operation == "" and "watch.replay(" in first.hint
    assert torch.isfinite(model.prompt_embeddings).all()  # raise mode stopped the step before the update


def test_the_replay_names_the_kl_line_in_the_helper_file():
    _, first, report = _run_and_replay()
    assert report is not None and (report.phase, report.step) == (first.phase, first.step)
    assert report.nonfinite_grads == ["prompt_embeddings"]
    assert report.operation.startswith("kl_div at ") and KL_LINE in report.operation
    assert report.operation.endswith("(in consistency_kl)")
    assert report.loss_site == first.loss_site  # the replay's own frames are not the user's line
    text = str(report)
    assert "first operation whose backward is non-finite: kl_div" in text and KL_LINE in text


def test_the_replay_lints_the_helper_file_that_built_the_loss():
    """Every project file on the failing path is linted, as one project: the step's file and the
    helper's. The helper's KL target is named `teacher_logits`, but its caller passes the output
    of the model being trained: TNL101 reports it, naming that call, and the report shows it."""
    pytest.importorskip("libcst")
    _, _, report = _run_and_replay()
    helper = kl_helpers.__file__
    assert helper in report.path_files and pt.__file__ in report.path_files
    call = f"prompt_tuning.py:{_line_of('loss = consistency_kl(', pt.__file__)}"
    found = [f for f in report.findings if " TNL101 " in f and KL_LINE in f]
    assert len(found) == 1 and call in found[0], report.findings
    assert found[0] in static_findings(helper, report.path_files)
    assert not any(" TNL101 " in f for f in static_findings(helper)), "alone, the name is taken at its word"


def _forward_backward(model, clean, augmented):
    pt.consistency_kl(model(augmented), model(clean)).backward()


def test_replay_in_record_mode_and_a_clean_step():
    model = pt.PromptedEncoder()
    clean, augmented = pt.views()
    with nan_watch(model, mode="record") as watch:
        report = watch.replay(_forward_backward, model, clean, augmented)
        assert report is watch.reports[-1] and KL_LINE in report.operation
        model.zero_grad()
        with torch.no_grad():
            model.prompt_embeddings.zero_()  # no spread: the softmax no longer underflows
        assert watch.replay(_forward_backward, model, clean, augmented) is None
    assert len(watch.reports) == 1
