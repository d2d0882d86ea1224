"""verify itself is tested by breaking fixes on purpose: every wrong fix here must FAIL.

Each mutation is a plausible mistake in a rule's fix (a scale, a detach, a guard too wide, a wrong
constant, a dropped `dim` or `keepdim`, a reduction or a broadcast over the wrong dim). The mutated
text is handed to verify as the linter's fix of one example AND as its pin (the pin regenerated to
the wrong text), so the FIX row passes and only the runs on the values can fail it. The shape
mistakes (`flat_passes`) are also run without the further shapes, where they pass: the batch dim,
3-D and 4-D inputs are what catch them. One test breaks the real fixer instead, the way a rule's
bug would.
"""

import dataclasses
from typing import Callable, NamedTuple, Optional, Sequence

import pytest

from torchnumlint import catalogue
from torchnumlint.runtime_check import linted, runner
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED
from torchnumlint.runtime_check.repros import REPROS

RULES = catalogue.load()


class Mutation(NamedTuple):
    name: str
    code: str
    old: str
    new: str
    dtypes: Optional[Sequence[str]] = None  # the dtypes that must fail (None: the first the example runs in)
    reason: str = ""  # a phrase of the failure's reason
    example: int = 1  # which example's fix is broken (1-based)
    flat_passes: bool = False  # a dim/keepdim/broadcast mistake that the example's 2-D inputs alone let through


MUTATIONS = [
    Mutation(
        "scale x1.005 (float32)",
        "TNL103",
        "return F.log_softmax(",
        "return 1.005 * F.log_softmax(",
        ("float32",),
        "other values than the mathematics",
    ),
    Mutation("scale x1.005 (low precision)", "TNL103", "return F.log_softmax(", "return 1.005 * F.log_softmax(", ("float16", "bfloat16")),
    Mutation("log of softmax + 1", "TNL103", "F.log_softmax(logits, dim=-1)", "torch.log(F.softmax(logits, dim=-1) + 1)"),
    Mutation(
        "log_softmax without its dim (3-D: dim 0)", "TNL103", "F.log_softmax(logits, dim=-1)", "F.log_softmax(logits)", flat_passes=True
    ),
    Mutation("class weights dropped", "TNL103", "weight=w,", "", example=2),
    Mutation("entropy summed over everything", "TNL103", "log_softmax(-1)).sum(-1)", "log_softmax(-1)).sum()", example=3),
    Mutation(
        "detached KL target", "TNL101", "F.log_softmax(s2, dim=-1)", "F.log_softmax(s2, dim=-1).detach()", None, "drops the gradient of s2"
    ),
    Mutation("KL target without its dim (3-D: dim 0)", "TNL101", "F.log_softmax(s2, dim=-1)", "F.log_softmax(s2)", flat_passes=True),
    Mutation(
        "mutual KL over the last dim, not the class dim 1", "TNL101", "a.log_softmax(1)", "a.log_softmax(-1)", example=3, flat_passes=True
    ),
    Mutation("twice the log-probabilities", "TNL102", "F.log_softmax(a, dim=-1)", "2 * F.log_softmax(a, dim=-1)"),
    Mutation("KL input without its dim (3-D: dim 0)", "TNL102", "F.log_softmax(a, dim=-1)", "F.log_softmax(a)", flat_passes=True),
    Mutation("log-sigmoid of the wrong sign", "TNL104", "F.logsigmoid(-z)", "F.logsigmoid(z)"),
    Mutation("log-sigmoid detached", "TNL104", "F.logsigmoid(-z)", "F.logsigmoid(-z).detach()", None, "drops the gradient of z"),
    Mutation("gate of the transposed weight", "TNL104", "logsigmoid(h @ w)", "logsigmoid(h @ w.t())", example=3),
    Mutation(
        "BCE summed, not averaged",
        "TNL105",
        "binary_cross_entropy_with_logits(z, y)",
        'binary_cross_entropy_with_logits(z, y, reduction="sum")',
    ),
    Mutation("BCE without its pixel weights", "TNL105", "gt, weight=w,", "gt,", example=3),
    Mutation("log1p with an eps", "TNL106", "torch.log1p(rate)", "torch.log1p(rate + 1e-8)"),
    Mutation("log1p of the wrong sign", "TNL106", "torch.log1p(-dropout)", "torch.log1p(dropout)", example=2),
    Mutation("expm1 clamped at 1e-12", "TNL107", "torch.expm1(h)", "torch.expm1(h).clamp_min(1e-12)"),
    Mutation("softplus with threshold 1", "TNL108", "F.softplus(rho)", "F.softplus(rho, threshold=1)"),
    Mutation(
        "margin averaged over the last dim only",
        "TNL108",
        "F.softplus(neg - pos).mean()",
        "F.softplus(neg - pos).mean(-1)",
        example=2,
        flat_passes=True,
    ),
    Mutation(
        "logsumexp keeping its dim", "TNL109", "torch.logsumexp(-energies, dim=-1)", "torch.logsumexp(-energies, dim=-1, keepdim=True)"
    ),
    Mutation("MINE over the wrong dim", "TNL109", "torch.logsumexp(t_marginal, 0)", "torch.logsumexp(t_marginal, -1)", example=2),
    Mutation("logaddexp as a max", "TNL109", "torch.logaddexp(log_a, log_b)", "torch.maximum(log_a, log_b)", example=3),
    Mutation("softmax over dim 1 (3-D: not the last)", "TNL110", "torch.softmax(scores, -1)", "torch.softmax(scores, 1)", flat_passes=True),
    Mutation(
        "softmax by logsumexp without keepdim",
        "TNL110",
        "torch.softmax(sim / t, dim=1)",
        "torch.exp(sim / t - torch.logsumexp(sim / t, dim=1))",
        example=2,
    ),
    Mutation("sigmoid of a clamped input", "TNL111", "torch.sigmoid(x)", "torch.sigmoid(x.clamp(-5, 5))"),
    Mutation("Gated: sigmoid of the transposed weight", "TNL111", "g * h + torch.sigmoid(z)", "g * h + torch.sigmoid(h @ w.T)", example=2),
    Mutation("stretched sigmoid without its scale", "TNL111", "1.2 * torch.sigmoid(", "torch.sigmoid(", example=3),
    Mutation("logit eps 1e-3", "TNL112", "eps=1e-6", "eps=1e-3"),
    Mutation("class logit eps 1e-2", "TNL112", "probs.logit(eps=1e-6)", "probs.logit(eps=1e-2)", example=2),
    Mutation(
        "cross-entropy of log-probabilities over the last dim",
        "TNL113",
        "F.cross_entropy(x, y)",
        "F.cross_entropy(x.log_softmax(-1), y)",
        flat_passes=True,
    ),
    Mutation("nll of log-probabilities over dim 0", "TNL113", "scores.log_softmax(-1)", "scores.log_softmax(0)", example=3),
    Mutation("KL summed, not per sample", "TNL114", 'reduction="batchmean"', 'reduction="sum"'),
    Mutation("Distiller: KL summed, not per sample", "TNL114", 'KLDivLoss(reduction="batchmean")', 'KLDivLoss(reduction="sum")', example=2),
    Mutation("a clamp that bites ordinary values", "TNL201", "clamp_min(1e-12)", "clamp_min(10.0)"),
    Mutation("masked count without keepdim", "TNL201", "n = valid_mask.sum(dim=1, keepdim=True)", "n = valid_mask.sum(dim=1)", example=2),
    Mutation(
        "Scaled: the population variance", "TNL201", "a.var(0).clamp_min(1e-12)", "a.var(0, correction=0).clamp_min(1e-12)", example=4
    ),
    Mutation("normalize with eps 1.0", "TNL202", "normalize(h, dim=-1)", "normalize(h, dim=-1, eps=1.0)"),
    Mutation("normalize over dim 1 (3-D: not the last)", "TNL202", "normalize(h, dim=-1)", "normalize(h, dim=1)", flat_passes=True),
    Mutation(
        "Head: features normalised over the last dim",
        "TNL202",
        "F.normalize(feats, dim=1)",
        "F.normalize(feats, dim=-1)",
        example=2,
        flat_passes=True,
    ),
    Mutation("norm without centring", "TNL204", "torch.linalg.vector_norm(h, dim=-1)", "torch.linalg.vector_norm(x, dim=-1)"),
    Mutation(
        "relu norm per row, not of all",
        "TNL204",
        "torch.linalg.vector_norm(torch.relu(a))",
        "torch.linalg.vector_norm(torch.relu(a), dim=-1)",
        example=2,
    ),
    Mutation("an eps inside the root too large", "TNL206", "clamp_min(1e-12)", "clamp_min(1e-2)"),
    Mutation("sine's clamp too large", "TNL206", "(1 - cos ** 2).clamp_min(1e-12)", "(1 - cos ** 2).clamp_min(1e-4)", example=2),
    Mutation("row means broadcast along dim 1 (3-D)", "TNL206", "mu[..., None]", "mu[:, None]", example=2, flat_passes=True),
    Mutation("a finite fill of -1e4", "TNL401", "torch.finfo(scores.dtype).min", "-1e4"),
    Mutation("padding filled with -100", "TNL401", "torch.finfo(logits.dtype).min", "-100.0", example=2),
    Mutation("custom op cast to float16", "TNL301", "cast_inputs=torch.float32", "cast_inputs=torch.float16"),
    Mutation(
        "logits clamped to +-10 before the loss",
        "TNL115",
        "binary_cross_entropy_with_logits(z, y)",
        "binary_cross_entropy_with_logits(z.clamp(-10, 10), y)",
    ),
    Mutation("positive weights given as weight", "TNL115", "pos_weight=pos_w", "weight=pos_w", example=3),
    Mutation(
        "cosine over dim 1 (3-D: not the last)",
        "TNL203",
        "cosine_similarity(z, peer_z, dim=-1)",
        "cosine_similarity(z, peer_z, dim=1)",
        flat_passes=True,
    ),
    Mutation(
        "cosine eps 1e-5 (bites on rows of norm 5e-6, the inputs times 1e-3)",
        "TNL203",
        "cosine_similarity(z, peer_z, dim=-1)",
        "cosine_similarity(z, peer_z, dim=-1, eps=1e-5)",
        flat_passes=True,
    ),
    Mutation("log prior clamped at 1e-3", "TNL207", "clamp_min(1e-12)", "clamp_min(1e-3)"),
    Mutation(
        "usage normalised per code over dim 0 (3-D)",
        "TNL207",
        "p = usage / usage.sum()",
        "p = usage / usage.sum(0)",
        example=2,
        flat_passes=True,
    ),
    Mutation("acos clamped at 1 - 1e-4", "TNL208", "1 - torch.finfo(cos.dtype).eps)", "1 - 1e-4)"),
    Mutation(
        "angle's cosine over dim 1 (3-D: not the last)",
        "TNL208",
        "cosine_similarity(pred, target, dim=-1)",
        "cosine_similarity(pred, target, dim=1)",
        flat_passes=True,
    ),
    Mutation("inner where drops depths below 1e-3", "TNL209", "torch.where(depth > 0, depth, 1)", "torch.where(depth > 1e-3, depth, 1)"),
    Mutation(
        "inner where drops scales below 1e-2",
        "TNL209",
        "torch.where(scale == 0, 1, scale)",
        "torch.where(scale.abs() < 1e-2, 1, scale)",
        example=2,
    ),
    Mutation(
        "heading of rows 0 and 1, not components (3-D)",
        "TNL210",
        "atan2(vel[..., 1], vel[..., 0])",
        "atan2(vel[:, 1], vel[:, 0])",
        flat_passes=True,
    ),
    Mutation("log-variance clamped at 50", "TNL211", "clamp(max=80.0)", "clamp(max=50.0)"),
    Mutation("KL summed over dim 1 (3-D: not the last)", "TNL211", ".sum(-1)", ".sum(1)", flat_passes=True),
    Mutation(
        "logdet of dims 0 and 1 swapped (3-D: not the matrix dims)",
        "TNL213",
        "torch.logdet(cov)",
        "torch.logdet(cov.transpose(0, 1))",
        flat_passes=True,
    ),
    Mutation("peak over dim 1 (3-D: not the last)", "TNL303", "amax(dim=-1, keepdim=True)", "amax(dim=1, keepdim=True)", flat_passes=True),
    Mutation("float16's eps, not its smallest normal", "TNL303", "torch.finfo(torch.float16).tiny", "torch.finfo(torch.float16).eps"),
    Mutation("unscaled gradients clipped at 10", "TNL307", "max_norm=1.0", "max_norm=10.0"),
    Mutation(
        "keys transposed over dims 1, 2 (4-D heads)",
        "TNL308",
        "(q * scale) @ k.transpose(-2, -1)",
        "(q * scale) @ k.transpose(1, 2)",
        flat_passes=True,
    ),
    Mutation(
        "attention softmax over dim 2 (4-D: the query dim)", "TNL308", "scores.softmax(dim=-1)", "scores.softmax(dim=2)", flat_passes=True
    ),
]


def _mutated_fixer(mutation: Mutation) -> Callable:
    """The linter's fixes with the mutation's example broken, and its pin regenerated to the
    broken text: the FIX row passes, so only the value runs can fail it."""

    def fixer(info: catalogue.RuleInfo):
        real = list(linted.real_fixes(info))
        i = mutation.example - 1
        text = real[i].text
        assert text is not None and mutation.old in text, (mutation.name, text)
        broken = text.replace(mutation.old, mutation.new, 1)
        real[i] = linted.Fixed(i, broken, broken)
        return tuple(real)

    return fixer


def _runs(mutation: Mutation, repros=None):
    repro = next(r for r in (repros or REPROS)[mutation.code] if r.example == mutation.example - 1)
    results = runner.verify(
        select=[mutation.code],
        device="cpu",
        dtypes=mutation.dtypes or repro.dtypes[:1],
        repros={mutation.code: (repro,)},
        fixer=_mutated_fixer(mutation),
    )
    return results, [r for r in results if r.example == mutation.example and r.oracle != "FIX"]


def test_the_suite_spans_the_catalogue():
    assert len(MUTATIONS) >= 30 and len({m.code for m in MUTATIONS}) >= 15
    assert sum(m.flat_passes for m in MUTATIONS) >= 8


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_a_wrong_fix_fails_on_the_values_alone(mutation):
    results, runs = _runs(mutation)
    fix_row = results[0]
    assert fix_row.oracle == "FIX" and fix_row.verdict == CONFIRMED, fix_row.evidence  # the pin agrees
    assert runs, "the mutation's dtypes are not run"
    assert all(r.verdict == FIX_FAILED for r in runs), [(r.dtype, r.verdict, r.reason) for r in runs]
    assert all(mutation.reason in r.reason for r in runs), [r.reason for r in runs]
    assert runner.exit_code(results) == 1


FLAT = [m for m in MUTATIONS if m.flat_passes]


@pytest.mark.parametrize("mutation", FLAT, ids=[m.name for m in FLAT])
def test_a_shape_mistake_is_caught_by_the_shapes(mutation):
    """The same mistake on the example's own inputs alone (no `Repro.shapes`) is CONFIRMED: the
    further shapes (a batch dim, 3-D, the reduced dim not last) are what catch it."""
    flat = {mutation.code: tuple(dataclasses.replace(r, shapes=()) for r in REPROS[mutation.code])}
    _, runs = _runs(mutation, flat)
    assert runs and all(r.verdict == CONFIRMED for r in runs), [(r.dtype, r.verdict, r.reason) for r in runs]


def test_the_original_as_its_own_fix_fails():
    """A fixer that changes nothing leaves the hazard: the 'fix' is not finite."""

    def fixer(info):
        real = linted.real_fixes(info)
        return (linted.Fixed(0, info.examples[0].bad, real[0].pinned),) + real[1:]

    results = runner.verify(select=["TNL101"], device="cpu", dtypes=["float32"], fixer=fixer)
    run = [r for r in results if r.oracle == "NF"]
    assert run[0].verdict == FIX_FAILED and "not finite" in run[0].reason


def test_a_broken_fixer_is_caught_in_the_text_and_in_the_values(monkeypatch):
    """The rule's fixer itself emits `log(softmax + 1)`: verify runs the fixer's text, so both the
    FIX row and the runs fail, while the pinned text is untouched."""
    import torchnumlint.fixes as fixes

    real = fixes.fix_text

    def broken(path, text, rules, *args, **kwargs):
        result = real(path, text, rules, *args, **kwargs)
        result.text = result.text.replace("F.log_softmax(logits, dim=-1)", "torch.log(F.softmax(logits, dim=-1) + 1)")
        return result

    monkeypatch.setattr(fixes, "fix_text", broken)
    results = runner.verify(select=["TNL103"], device="cpu", dtypes=["float32"])
    assert results[0].oracle == "FIX" and results[0].verdict == FIX_FAILED
    assert "differs from the pinned fix" in results[0].evidence[0]
    first = [r for r in results if r.example == 1 and r.oracle == "NF"]
    assert [r.verdict for r in first] == [FIX_FAILED]


def test_a_stale_pin_fails_the_fix_row_but_the_runs_use_the_linter(monkeypatch):
    """A pinned text that no longer matches the fixer fails the FIX row; the runs judge what the
    linter really writes (here correct), so they still confirm."""
    import dataclasses

    info = RULES["TNL103"]
    stale = dataclasses.replace(info.examples[0], fixed=info.examples[0].fixed.replace("dim=-1", "-1"))
    rules = {"TNL103": dataclasses.replace(info, examples=(stale,) + info.examples[1:])}
    results = runner.verify(select=["TNL103"], device="cpu", dtypes=["float32"], rules=rules)
    assert results[0].verdict == FIX_FAILED
    assert all(r.verdict == CONFIRMED for r in results[1:]), [(r.example, r.reason) for r in results[1:]]
