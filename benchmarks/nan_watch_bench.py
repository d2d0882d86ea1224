"""Step time of a small transformer on the CPU: no checking vs nan_watch vs detect_anomaly.

    python benchmarks/nan_watch_bench.py [--steps 5] [--rounds 8] [--threads N]

One process, one model, the same batches; the configurations are interleaved round by round, in an
order rotated every round (so drift in machine load hits them alike) and each reports the median step time over all its steps.
A step is forward + loss + backward + AdamW step + zero_grad. Ratios are against the no-check
baseline. Results for the README: docs/nan_watch_benchmark.md.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import time
import warnings

import torch
from torch import nn

from torchnumlint.runtime_check import nan_watch


class TinyTransformer(nn.Module):
    def __init__(self, vocab=1000, d_model=128, nhead=4, layers=2, ff=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, ff, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.encoder(self.embed(tokens))))


def make_step(model, opt, tokens, targets):
    loss_fn = nn.CrossEntropyLoss()

    def step():
        logits = model(tokens)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def timed(step, n, context_factory):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        with context_factory():
            step()
        times.append(time.perf_counter() - start)
    return times


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5, help="steps per configuration per round")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TinyTransformer()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 1000, (args.batch, args.seq))
    targets = torch.randint(0, 1000, (args.batch, args.seq))
    step = make_step(model, opt, tokens, targets)

    def anomaly():
        return torch.autograd.detect_anomaly(check_nan=True)

    configs = [
        ("no checking", None, contextlib.nullcontext),
        ("nan_watch (every step)", 1, contextlib.nullcontext),
        ("nan_watch (every=10)", 10, contextlib.nullcontext),
        ("detect_anomaly", None, anomaly),
    ]
    n_params = sum(p.numel() for p in model.parameters())
    n_modules = sum(1 for _ in model.modules())
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads; model: {n_params / 1e6:.2f}M parameters, {n_modules} modules; "
          f"batch {args.batch} x seq {args.seq}; {args.rounds} rounds x {args.steps} steps per configuration")

    for _ in range(5):  # warm-up
        step()
    samples = {name: [] for name, _, _ in configs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # detect_anomaly warns that it is slow
        for r in range(args.rounds):
            # rotate the order every round: no configuration always runs first or after another
            for name, every, ctx in configs[r % len(configs):] + configs[: r % len(configs)]:
                # hooks are attached before and removed after the timed block
                watch = nan_watch(model, every=every) if every else None
                try:
                    samples[name] += timed(step, args.steps, ctx)
                finally:
                    if watch is not None:
                        watch.close()
    base = statistics.median(samples["no checking"])
    print(f"{'configuration':<26}{'median step (ms)':>18}{'ratio':>8}")
    for name, _, _ in configs:
        med = statistics.median(samples[name])
        print(f"{name:<26}{med * 1e3:>18.2f}{med / base:>8.2f}")
    ratios = {name: statistics.median(v) / base for name, v in samples.items()}
    return ratios


if __name__ == "__main__":
    main()
