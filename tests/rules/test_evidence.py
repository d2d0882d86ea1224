"""Evidence before a report (the default mode): a division or root rule reports only with
evidence that its argument reaches the hazard, a gradient rule only where a gradient can flow, and
no rule on values that are not torch tensors. Each false form here stands next to a true one that
still fires. The cases are written the way training and model code is written."""

import textwrap

import pytest

from tests.conftest import fixed, lint
from torchnumlint.config import Config
from torchnumlint.rules.base import registry
from torchnumlint.runner import Options, run

DIVISION = ("TNL201", "TNL202", "TNL204", "TNL206")


def codes(code, *rules, strict=False):
    return [c for c, _ in lint(textwrap.dedent(code), *(rules or DIVISION), strict=strict)]


# ---------------------------------------------------------------------------------------------
# 3. It can be zero for real inputs

REACHES_ZERO = [
    # a count of a mask: an all-padding batch selects nothing
    ("""
     import torch
     def masked_mean(hidden, attention_mask):
         m = attention_mask.unsqueeze(-1).float()
         return (hidden * m).sum(1) / m.sum(1)
     """, "TNL201"),
    ("""
     import torch
     def token_loss(losses, labels: torch.Tensor):
         return losses.sum() / (labels != -100).sum()
     """, "TNL201"),
    # standardising data that can be constant (equal rewards in a sparse-reward episode)
    ("""
     import torch
     def normalise_advantages(adv):
         return (adv - adv.mean()) / adv.std()
     """, "TNL201"),
    # advantages unpacked from a batch of rollouts
    ("""
     import torch
     def training_step(self, batch):
         states, actions, adv = batch
         adv = (adv - adv.mean()) / adv.std()
         return adv
     """, "TNL201"),
    # weights that can all be 0 (confidences of rejected matches)
    ("""
     import torch
     def weighted_mean(x, weights):
         w_sum = weights.sum(dim=-1, keepdim=True)
         return (weights * x).sum(dim=-1, keepdim=True) / w_sum
     """, "TNL201"),
    # a sum of relu outputs
    ("""
     import torch
     import torch.nn.functional as F
     def share(scores):
         pos = F.relu(scores)
         return pos / pos.sum(-1, keepdim=True)
     """, "TNL201"),
    # the direction between two points that can coincide
    ("""
     import torch
     def direction(p0, p1):
         d = p1 - p0
         return d / d.norm(dim=-1, keepdim=True)
     """, "TNL202"),
    # the rows a module is given: padding rows are all 0
    ("""
     import torch
     class Pool(torch.nn.Module):
         def forward(self, tokens):
             return tokens / tokens.norm(dim=-1, keepdim=True)
     """, "TNL202"),
    # a layer norm by hand: the root mean square of a centred row is 0 for a constant row
    ("""
     import torch
     class Norm(torch.nn.Module):
         def forward(self, h):
             centred = h - h.mean(-1, keepdim=True)
             return centred / torch.sqrt((centred ** 2).mean(-1, keepdim=True))
     """, "TNL201"),
    ("""
     import torch
     class Spread(torch.nn.Module):
         def forward(self, h):
             centred = h - h.mean(-1, keepdim=True)
             return torch.sqrt((centred ** 2).mean(-1)).mean()
     """, "TNL206"),
    # pairwise distances of a batch with itself: 0 on the diagonal, in a training step
    ("""
     import torch
     def distances(emb):
         return torch.sqrt(((emb[:, None] - emb[None]) ** 2).sum(-1))

     def train_step(model, opt, x):
         loss = -distances(model(x)).mean()
         loss.backward()
         opt.step()
     """, "TNL204"),
    # a variance by hand cancels below 0
    ("""
     import torch
     def layer_std(h):
         mu = h.mean(-1, keepdim=True)
         return torch.sqrt((h * h).mean(-1, keepdim=True) - mu ** 2)
     """, "TNL206"),
]


@pytest.mark.parametrize("code, rule", REACHES_ZERO)
def test_evidence_that_it_reaches_zero_is_reported(code, rule):
    assert codes(code) == [rule]


NO_EVIDENCE = [
    # the std of a network's output over large dims (classifier-free guidance rescaling)
    """
    import torch
    def rescale(cfg, text):
        std_text = text.std(dim=list(range(1, text.ndim)), keepdim=True)
        std_cfg = cfg.std(dim=list(range(1, cfg.ndim)), keepdim=True)
        return cfg * (std_text / std_cfg)
    """,
    # standardising freshly sampled latents: never constant
    """
    import torch
    def renoise(shape, anchor_std, anchor_mean):
        latents = torch.randn(shape)
        smoothed = torch.nn.functional.avg_pool2d(latents, 3, 1, 1)
        return (smoothed - smoothed.mean()) / smoothed.std() * anchor_std + anchor_mean
    """,
    # a fixed positive kernel
    """
    import torch
    def gaussian(size, sigma):
        x = torch.arange(size) - size // 2
        k = torch.exp(-(x ** 2) / (2 * sigma ** 2))
        return k / k.sum()
    """,
    # a learned parameter's norm (weight normalisation)
    """
    import torch
    class Proto(torch.nn.Module):
        def forward(self, x):
            w = self.weight / self.weight.norm(dim=1, keepdim=True)
            return x @ w.t()
    """,
    # a network output's norm
    """
    import torch
    class Guidance(torch.nn.Module):
        def forward(self, x):
            pred = self.unet(x)
            return pred / torch.norm(pred, dim=-1, keepdim=True)
    """,
    # a residual's norm: a prediction and a noisy measurement do not coincide
    """
    import torch
    class ResidualLoss(torch.nn.Module):
        def forward(self, pred, measured):
            return torch.sqrt(((pred - measured) ** 2).sum())
    """,
    # the determinant of a 2 x 2 covariance (its callers add eps to the diagonal)
    """
    import torch
    class Whiten(torch.nn.Module):
        def forward(self, vrr, vii, vri):
            delta = vrr * vii - vri ** 2
            return delta.sqrt()
    """,
    # a noise schedule's sigmas: plain state of an object with no parameters, no gradient
    """
    import torch
    class Scheduler:
        def step(self, sample, eps):
            sigma = self.sigmas[self.index]
            sigma_hat = sigma * (self.gamma + 1)
            return sample + eps * (sigma_hat ** 2 - sigma ** 2) ** 0.5
    """,
    # 1 - alpha_bar of a schedule
    """
    import torch
    def q_sample(x0, noise, alpha_bar):
        return torch.sqrt(alpha_bar) * x0 + torch.sqrt(1 - alpha_bar) * noise
    """,
]


@pytest.mark.parametrize("code", NO_EVIDENCE)
def test_no_evidence_no_default_finding(code):
    assert codes(code) == []


def test_strict_mode_reports_what_has_no_evidence():
    code = NO_EVIDENCE[0]
    assert codes(code) == []
    assert codes(code, strict=True) == ["TNL201"]
    (finding,) = _findings(code, strict=True)
    assert "strict mode" in finding.message


def _findings(code, strict=False, rules=DIVISION):
    from torchnumlint.engine import lint_text

    return lint_text("x.py", textwrap.dedent(code), [registry()[c] for c in rules], strict=strict)


def test_the_message_names_the_evidence():
    (finding,) = _findings(REACHES_ZERO[0][0])
    assert "when nothing is selected" in finding.message
    (finding,) = _findings(REACHES_ZERO[2][0])
    assert "constant data" in finding.message


def test_a_gradient_claim_needs_code_that_differentiates():
    """The same distance in a clustering routine that never trains: no gradient is shown, so
    the NaN-gradient claim is made in strict mode only."""
    code = """
    import torch
    def spread(points):
        return torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1)).sum()
    """
    assert codes(code) == []
    assert codes(code, strict=True) == ["TNL204"]


def test_pairs_of_one_tensor_at_two_index_sets_are_no_evidence():
    """`pos[i] - pos[j]` over a graph's edges is 0 only for self-loops, which such code leaves
    out; the pairwise differences of a tensor with itself are 0 on the diagonal."""
    code = """
    import torch
    class Interaction(torch.nn.Module):
        def forward(self, pos, edge_index):
            i, j = edge_index
            return (pos[i] - pos[j]).pow(2).sum(dim=-1).sqrt()
    """
    assert codes(code) == []
    code = """
    import torch
    class Repulsion(torch.nn.Module):
        def forward(self, emb):
            return torch.sqrt(((emb[:, None] - emb[None]) ** 2).sum(-1)).mean()
    """
    assert codes(code) == ["TNL204"]


def test_a_cosine_clamped_inside_the_unit_interval_is_no_evidence():
    code = """
    import torch
    class AngularMargin(torch.nn.Module):
        def forward(self, cosine):
            cosine = torch.clamp(cosine, -1 + 1e-7, 1 - 1e-7)
            return torch.sqrt(1.0 - torch.pow(cosine, 2))
    """
    assert codes(code) == []
    assert codes(code.replace("    cosine = torch.clamp(cosine, -1 + 1e-7, 1 - 1e-7)\n", "")) == ["TNL206"]


# ---------------------------------------------------------------------------------------------
# 1. It is a torch tensor; 7. fixes right for the value


def test_numpy_values_are_not_flagged_in_a_torch_file():
    code = """
    import numpy as np
    import torch
    def stats(values):
        arr = np.asarray(values)
        mask = arr > 0
        return (arr - arr.mean()) / arr.std() + arr.sum() / mask.sum() + np.sqrt(arr.var())
    """
    assert codes(code, strict=True) == []


def test_a_signed_sum_gets_no_clamp():
    """`x / w.sum(-1)` with w of either sign: a clamp would turn -0.5 into 1e-12."""
    code = """
    import torch
    def weighted(x, weights):
        return (x * weights).sum(-1) / weights.sum(-1)
    """
    assert codes(code) == ["TNL201"]
    assert fixed(textwrap.dedent(code), "TNL201") == textwrap.dedent(code)


def test_an_unknown_value_gets_no_torch_only_fix():
    """A count of a mask whose type the code does not show: reported, but `clamp_min` is a
    tensor method, so no fix."""
    code = """
    import torch
    def mean_over(values, mask):
        return values.sum() / mask.sum()
    """
    assert codes(code) == ["TNL201"]
    assert fixed(textwrap.dedent(code), "TNL201") == textwrap.dedent(code)
    annotated = textwrap.dedent(code.replace("mask)", "mask: torch.Tensor)"))
    # a mask by name can be soft (a sum of 0.5 must stay 0.5): clamped at eps; a comparison's
    # sum is an integer count: clamped at 1, exact
    assert "mask.sum().clamp_min(1e-12)" in fixed(annotated, "TNL201")
    boolean = annotated.replace("mask.sum()", "(mask > 0).sum()")
    assert "(mask > 0).sum().clamp_min(1)" in fixed(boolean, "TNL201")


# ---------------------------------------------------------------------------------------------
# 2. A gradient can flow

NO_GRADIENT = [
    # a Lightning validation step runs under no_grad
    """
    import torch
    class Model(torch.nn.Module):
        def validation_step(self, batch, idx):
            d = batch[0] - batch[1]
            return torch.sqrt((d ** 2).sum(-1))
    """,
    # a helper reached only from evaluation code
    """
    import torch
    def distance(a, b):
        return torch.sqrt(((a - b) ** 2).sum(-1))

    @torch.no_grad()
    def evaluate(model, loader):
        return [distance(model(x), y) for x, y in loader]
    """,
    # dataset code
    """
    import torch
    class Points(torch.utils.data.Dataset):
        def __getitem__(self, i):
            p, q = self.pairs[i]
            return torch.sqrt(((p - q) ** 2).sum(-1))
    """,
    """
    import torch
    def collate_pairs(batch):
        a = torch.stack([b[0] for b in batch])
        c = torch.stack([b[1] for b in batch])
        return torch.sqrt(((a - c) ** 2).sum(-1))
    """,
    # a pipeline's __call__
    """
    import torch
    class TextPipeline:
        def __call__(self, a, b):
            return torch.sqrt(((a - b) ** 2).sum(-1))
    """,
    # detached, index-derived values
    """
    import torch
    def grid_distance(n):
        ys = torch.arange(n)[:, None]
        xs = torch.arange(n)[None, :]
        return torch.sqrt(((ys - xs) ** 2).sum(-1))
    """,
    """
    import torch
    class Patches(torch.nn.Module):
        def forward(self, mask, center):
            rows, cols = torch.where(mask > 0)
            points = torch.stack([rows, cols], -1)
            return torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    """,
    """
    import torch
    def rmse_metric(pred, target):
        return torch.sqrt(((pred.detach() - target) ** 2).mean()).item()
    """,
]


@pytest.mark.parametrize("code", NO_GRADIENT)
def test_no_gradient_no_gradient_claim(code):
    assert codes(code, strict=True) == []


def test_the_same_helper_with_a_training_caller_is_reported():
    code = """
    import torch
    def distances(e):
        return torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))

    @torch.no_grad()
    def evaluate(model, loader):
        return [distances(model(x)) for x, _ in loader]

    def train_step(model, x):
        distances(model(x)).mean().backward()
    """
    assert codes(code) == ["TNL204"]


def test_a_helper_of_a_script_run_at_module_level_carries_gradients():
    code = """
    import torch
    def distances(e):
        return torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))

    def train(model, x):
        distances(model(x)).mean().backward()

    if __name__ == "__main__":
        train(None, None)
    """
    assert codes(code) == ["TNL204"]


# ---------------------------------------------------------------------------------------------
# No finding of any default-on rule in a file that does not import torch


def test_no_finding_in_a_tree_of_files_that_never_import_torch(tmp_path):
    """Every rule's own bad examples, with torch's imports turned into numpy's: the same text
    shapes, no torch code, so nothing is reported."""
    rules = [rule for rule in registry().values() if rule.default]
    count = 0
    for rule in rules:
        for i, example in enumerate(rule.examples):
            text = "\n".join(
                "import numpy as np" if line.lstrip().startswith(("import torch", "from torch")) else line
                for line in example.bad.splitlines()
            )
            folder = tmp_path / rule.code.lower()
            folder.mkdir(exist_ok=True)
            (folder / f"example_{i}.py").write_text(text + "\n")
            count += 1
    result = run([str(tmp_path)], Config(root=tmp_path), rules, Options())
    assert result.files == count and not result.errors
    assert result.findings == []


# ---------------------------------------------------------------------------------------------
# Regressions found in review


def test_a_method_helper_called_only_from_evaluation_is_gradient_free():
    code = """
    import torch
    class Retrieval(torch.nn.Module):
        def _distances(self, e):
            return torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))

        @torch.no_grad()
        def evaluate(self, e):
            return self._distances(e)
    """
    assert codes(code, strict=True) == []


def test_a_bytes_annotation_is_no_crash():
    assert codes("import torch\ndef f(x: b'Tensor'):\n    return x / x.sum()\n", strict=True) == ["TNL201"]


def test_forward_evidence_is_a_modules_forward_not_any_function_so_named():
    nested = """
    import torch
    class Builder:
        def build(self):
            def forward(x):
                return x / x.norm(dim=1, keepdim=True)
            return forward
    """
    assert codes(nested) == []
    method = """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            return x / x.norm(dim=1, keepdim=True)
    """
    assert codes(method) == ["TNL202"]


def test_mask_words_are_whole_words():
    code = """
    import torch
    def dropout_scale(x, keep_prob: torch.Tensor, invalid_pos: torch.Tensor):
        return x / keep_prob.sum(dim=-1) + x / invalid_pos.sum(dim=-1)
    """
    assert codes(code) == []
    assert codes(code.replace("invalid_pos", "invalid_mask")) == ["TNL201"]
    assert codes(code.replace("invalid_pos", "cmasks")) == ["TNL201"]  # a compound mask word


def test_a_gradient_claim_in_strict_mode_says_why_it_is_there():
    code = """
    import torch
    def spread(points):
        return torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1)).sum()
    """
    (finding,) = _findings(code, strict=True)
    assert "strict mode" in finding.message


def test_a_long_chain_of_rebindings_is_answered_once_per_node(monkeypatch):
    """`h = h * h + h * h` sixty times: each node's kind is worked out once (it was 1.7 million
    times, 9 s, before answers were kept)."""
    from torchnumlint.rules import evidence

    calls = []
    real = evidence._value_kind
    monkeypatch.setattr(evidence, "_value_kind", lambda *args: calls.append(1) or real(*args))
    code = "import torch\ndef f(w, h):\n" + "    h = h * h + h * h\n" * 60 + "    return w / h.sum()\n"
    _findings(code, strict=True)
    assert 0 < len(calls) < 2000


# ---------------------------------------------------------------------------------------------
# Names bound more than once: the latest binding that runs on every way to the use


def test_a_straight_line_rebinding_is_followed():
    code = """
    import torch
    import torch.nn.functional as F
    def share(x, w):
        w = F.relu(w)
        return (x * w).sum(-1) / w.sum(-1)
    """
    assert codes(code) == ["TNL201"]


def test_a_rebinding_in_a_branch_is_not_followed():
    """`w` is `w.abs()` or `w.abs() + 1` depending on the branch: neither is certain."""
    code = """
    import torch
    def share(x, w, flag):
        w = w.abs()
        if flag:
            w = w + 1
        return x / w.sum()
    """
    assert codes(code) == []


def test_in_a_loop_a_binding_of_the_same_iteration_is_followed_one_of_the_last_is_not():
    same_iteration = """
    import torch
    def accumulate(x, ws):
        for w in ws:
            t = torch.relu(w)
            t = t.sum()
            x = x / t
        return x
    """
    assert codes(same_iteration) == ["TNL201"]
    last_iteration = """
    import torch
    def accumulate(x, ws):
        t = torch.relu(ws[0])
        for w in ws:
            x = x / t.sum()
            t = w.exp()
        return x
    """
    assert codes(last_iteration) == []


# ---------------------------------------------------------------------------------------------
# What is not a guard: selecting or overwriting the result keeps the forward finite, not the
# gradient (measured: the gradient of torch.where(d > 0, x / d, 0) is NaN where d == 0)


def test_a_division_selected_away_by_where_is_still_a_finding_where_a_gradient_flows():
    code = """
    import torch
    class MaskedMean(torch.nn.Module):
        def forward(self, h, mask):
            n = mask.sum(-1, keepdim=True)
            return torch.where(n > 0, (h * mask).sum(-1, keepdim=True) / n, 0.0)
    """
    (finding,) = _findings(code)
    assert finding.code == "TNL201" and "gradient" in finding.message and finding.fix is None
    evaluation = code.replace("def forward(self, h, mask):", "@torch.no_grad()\n        def forward(self, h, mask):")
    assert codes(evaluation) == []


def test_overwriting_the_result_afterwards_is_no_guard():
    code = """
    import torch
    class MaskedMean(torch.nn.Module):
        def forward(self, h, mask):
            n = mask.sum(-1, keepdim=True)
            out = (h * mask).sum(-1, keepdim=True) / n
            out[n == 0] = 0
            return out
    """
    assert codes(code) == ["TNL201"]
    tested = code.replace("            out = (h", "            if (n == 0).any():\n                return h.new_zeros(n.shape)\n            out = (h")
    assert codes(tested) == []
