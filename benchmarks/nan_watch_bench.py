"""What NaN checking costs per training step on the CPU, side by side, as the mean over all steps.

    python benchmarks/nan_watch_bench.py [--models mlp,transformer] [--rounds 6] [--steps 10]
                                         [--threads 1] [--compile]

Configurations, each on the same model, optimizer and batches:

- no checking (the baseline of every ratio);
- nan_watch, scope="modules" (every submodule's outputs and gradients) and scope="boundary" (the
  root module's inputs/outputs and the parameter gradients), with every=1 and every=10;
- `torch.autograd.detect_anomaly(check_nan=True)` around forward and backward;
- torch-audit 0.3.0 itself (`pip install torch-audit==0.3.0`; skipped with a note when it is not
  installed): its `Auditor(model, optimizer=opt, every_n_steps=N)` with its default runtime
  validators, the step run through `auditor.forward`, `auditor.backward` and
  `auditor.optimizer_step` as its README shows, N = 1 and 10;
- what `watch.replay` adds to the one step it replays: the step under `watch_trace.StepTrace`
  (each op's creation site recorded, a hook on each graph node), here on every step to time it.

A step is forward + loss + backward + AdamW step + zero_grad. The configurations are
interleaved round by round, in an order rotated every round, so drift in the machine's load hits
them alike. A round runs `--steps` steps of one configuration (nan_watch's hooks are attached
before and removed after the round; `--steps` is a multiple of 10, so every=10 checks exactly one
step in ten) and its mean step time is divided by the mean of the baseline's round in the same
rotation: the table gives the mean step time over ALL steps (checked and unchecked), the mean of
the per-round ratios and their range. `--compile` adds what torch.compile does to a watched model:
graph breaks per scope (`torch._dynamo.explain` of the forward, and dynamo's counters over real
training steps) and the compiled step time. Results: docs/nan_watch-cost.md.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional

import torch
from torch import nn
from torch.nn import functional as F

from torchnumlint.runtime_check import nan_watch
from torchnumlint.runtime_check.watch_trace import StepTrace


# ---- models ----------------------------------------------------------------------------------


class TinyTransformer(nn.Module):
    """0.65M parameters, 26 modules: embedding, 2 encoder layers (d_model 128, 4 heads, ff 512),
    LayerNorm, vocabulary head; tokens 16 x 64."""

    def __init__(self, vocab=1000, d_model=128, nhead=4, layers=2, ff=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, ff, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.encoder(self.embed(tokens))))


def mlp(width=256, depth=4, classes=10):
    """A residual-free MLP classifier: `depth` x (Linear, LayerNorm, GELU), then a head; batch 64."""
    layers: List[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(64 if i == 0 else width, width), nn.LayerNorm(width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


@dataclass
class Workload:
    name: str
    model: nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def workloads(names: List[str]) -> List[Workload]:
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    made = {
        "mlp": lambda: Workload(
            "MLP (4 x 256, batch 64)", mlp(), torch.randn(64, 64, generator=g), torch.randint(0, 10, (64,), generator=g), F.cross_entropy
        ),
        "transformer": lambda: Workload(
            "transformer (2 layers, d 128, tokens 16 x 64)",
            TinyTransformer(),
            torch.randint(0, 1000, (16, 64), generator=g),
            torch.randint(0, 1000, (16, 64), generator=g),
            lambda logits, y: F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)),
        ),
    }
    return [made[n]() for n in names]


# ---- the checks compared ---------------------------------------------------------------------


@dataclass
class Config:
    name: str
    watch: Optional[Dict[str, object]] = None  # nan_watch options; hooks attached for the round
    anomaly: bool = False
    audit_every: int = 0  # torch-audit's every_n_steps (0: not torch-audit)
    trace: bool = False  # the step under watch_trace.StepTrace, as watch.replay runs it
    samples: List[float] = field(default_factory=list)  # per-step seconds
    ratios: List[float] = field(default_factory=list)  # per-round mean / baseline's round mean


def configs() -> List[Config]:
    return [
        Config("no checking"),
        # scope="modules" is nan_watch's default: left implicit, as users write it
        Config('nan_watch scope="modules", every=1', watch={"every": 1}),
        Config('nan_watch scope="modules", every=10', watch={"every": 10}),
        Config('nan_watch scope="boundary", every=1', watch={"scope": "boundary", "every": 1}),
        Config('nan_watch scope="boundary", every=10', watch={"scope": "boundary", "every": 10}),
        Config("detect_anomaly(check_nan=True)", anomaly=True),
        Config("torch-audit 0.3.0 Auditor, every_n_steps=1", audit_every=1),
        Config("torch-audit 0.3.0 Auditor, every_n_steps=10", audit_every=10),
        Config("a replayed step (watch_trace.StepTrace), timed on every step", trace=True),
    ]


def supported(cfg: Config, model: nn.Module) -> Optional[str]:
    """None when this watch.py accepts the configuration's options (and torch-audit is installed
    for its rows), else why not."""
    if cfg.audit_every:
        try:
            import torch_audit
        except ImportError:
            return "torch-audit is not installed (pip install torch-audit==0.3.0)"
        return None if torch_audit.__version__ == "0.3.0" else f"torch-audit {torch_audit.__version__} is not 0.3.0"
    if cfg.watch is None:
        return None
    try:
        nan_watch(model, **cfg.watch).close()
    except TypeError as e:
        return str(e)
    return None


def train_step(w: Workload, opt: torch.optim.Optimizer, cfg: Config, auditor=None) -> None:
    if auditor is not None:  # torch-audit's own loop: its forward, backward and optimizer step
        loss = w.loss(auditor.forward(w.inputs), w.targets)
        auditor.backward(loss)
        auditor.optimizer_step()
        opt.zero_grad(set_to_none=True)
        return
    checking = torch.autograd.detect_anomaly(check_nan=True) if cfg.anomaly else StepTrace() if cfg.trace else contextlib.nullcontext()
    with checking:
        loss = w.loss(w.model(w.inputs), w.targets)
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def run_round(w: Workload, opt, cfg: Config, steps: int) -> List[float]:
    """`steps` timed steps of one configuration; nan_watch's hooks (or torch-audit's) are attached
    before the round and removed after it."""
    watch = nan_watch(w.model, mode="raise", **cfg.watch) if cfg.watch is not None else None
    auditor = None
    if cfg.audit_every:
        from torch_audit import Auditor

        auditor = Auditor(w.model, optimizer=opt, every_n_steps=cfg.audit_every)
        auditor.attach()
    times = []
    try:
        for _ in range(steps):
            start = time.perf_counter()
            train_step(w, opt, cfg, auditor)
            times.append(time.perf_counter() - start)
    finally:
        if watch is not None:
            watch.close()
        if auditor is not None:
            auditor.detach()
    return times


def measure(w: Workload, rounds: int, steps: int) -> List[Config]:
    opt = torch.optim.AdamW(w.model.parameters(), lr=1e-4)
    table = configs()
    skipped = {c.name: why for c in table if (why := supported(c, w.model))}
    table = [c for c in table if c.name not in skipped]
    for _ in range(5):  # warm-up
        train_step(w, opt, table[0])
    base = table[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # detect_anomaly warns that it is slow
        for r in range(rounds):
            # rotate the order every round: no configuration always runs first or after another
            round_means: Dict[str, float] = {}
            for cfg in table[r % len(table) :] + table[: r % len(table)]:
                times = run_round(w, opt, cfg, steps)
                cfg.samples += times
                round_means[cfg.name] = statistics.fmean(times)
            for cfg in table:
                cfg.ratios.append(round_means[cfg.name] / round_means[base.name])
    for name, why in skipped.items():
        print(f"  not measured: {name}: {why}")
    return table


def print_table(w: Workload, table: List[Config], rounds: int, steps: int) -> None:
    n_params = sum(p.numel() for p in w.model.parameters())
    n_modules = sum(1 for _ in w.model.modules())
    print(f"\n{w.name}: {n_params / 1e6:.2f}M parameters, {n_modules} modules; {rounds} rounds x {steps} steps per configuration")
    print("| configuration | mean step (ms) | ratio (mean of rounds) | ratio range |")
    print("|---|---:|---:|---:|")
    for cfg in table:
        spread = f"{min(cfg.ratios):.2f}-{max(cfg.ratios):.2f}" if cfg is not table[0] else ""
        print(f"| {cfg.name} | {statistics.fmean(cfg.samples) * 1e3:.2f} | {statistics.fmean(cfg.ratios):.2f} | {spread} |")


# ---- torch.compile -----------------------------------------------------------------------------


def compile_report(w: Workload, steps: int) -> None:
    """Graph breaks and compiled step time of `torch.compile(model)` watched per scope. The watch is
    attached to the compiled module, the order a user writes (`model = torch.compile(model)` first).
    Breaks of the forward come from `torch._dynamo.explain`; the graphs compiled over real training
    steps and the reasons of their breaks from dynamo's counters (which count a reason once)."""
    import logging

    from torch._dynamo.utils import counters

    torch._logging.set_logs(dynamo=logging.ERROR)  # each break would print its stack
    print(f"\ntorch.compile of {w.name} (inductor):")
    print(
        "| watch | graph breaks in the forward (explain) | graphs compiled over training steps | break reasons | mean compiled step (ms) |"
    )
    print("|---|---:|---:|---|---:|")
    for label, options in [("none", None), ('scope="modules"', {}), ('scope="boundary"', {"scope": "boundary"})]:
        torch._dynamo.reset()
        compiled = torch.compile(w.model)
        try:
            watch = nan_watch(compiled, mode="record", **options) if options is not None else None
        except TypeError as e:
            print(f"| {label} | not available in this watch.py: {e} | | | |")
            continue
        try:
            forward_breaks = torch._dynamo.explain(compiled)(w.inputs).graph_break_count
            torch._dynamo.reset()
            counters.clear()
            opt = torch.optim.AdamW(w.model.parameters(), lr=1e-4)
            plain, on_compiled = Config(label), replace(w, model=compiled)
            train_step(on_compiled, opt, plain)  # compiles
            times = []
            for _ in range(steps):
                start = time.perf_counter()
                train_step(on_compiled, opt, plain)
                times.append(time.perf_counter() - start)
            graphs = counters["stats"]["unique_graphs"]
            reasons = sorted({reason.splitlines()[0][:80] for reason in counters["graph_break"]})
        finally:
            if watch is not None:
                watch.close()
        print(f"| {label} | {forward_breaks} | {graphs} | {'; '.join(reasons) or '-'} | {statistics.fmean(times) * 1e3:.2f} |")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp,transformer")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=10, help="steps per round; a multiple of 10")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (0: leave as is)")
    p.add_argument("--compile", action="store_true", help="also measure torch.compile (inductor)")
    args = p.parse_args(argv)
    if args.steps % 10:
        p.error("--steps must be a multiple of 10 (every=10 then checks one step in ten)")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} threads")
    results = {}
    for w in workloads(args.models.split(",")):
        table = measure(w, args.rounds, args.steps)
        print_table(w, table, args.rounds, args.steps)
        results[w.name] = {c.name: statistics.fmean(c.ratios) for c in table}
        if args.compile:
            compile_report(w, args.steps)
    return results


if __name__ == "__main__":
    main()
