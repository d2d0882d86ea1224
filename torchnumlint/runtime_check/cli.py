"""`python -m torchnumlint.runtime_check` / `torchnumlint verify`: argparse, torch and stdlib only.

    python -m torchnumlint.runtime_check [--device auto|cpu|cuda] [--dtype float32,float16,...]
                                         [--select TNL101,TNL2] [--format text|json|markdown] [-q]

`--format markdown` writes the page `docs/runtime-results.md` is generated from: the device, the
torch version and every verdict.

Exit status: 0 when every selected check is CONFIRMED or legitimately SKIPPED, 1 otherwise,
2 on a usage error or a device this machine lacks (`--device cuda` without CUDA).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

DTYPE_CHOICES = ("float32", "float16", "bfloat16", "autocast")


def _csv(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchnumlint verify",
        description="Run every rule's reproduction on a device: the rule's own bad example and the "
        "fix the linter produces, on adversarial and benign inputs, with the verdict and its numbers.",
    )
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: cuda when available, else cpu; cuda where CUDA is absent is an error (exit 2)",
    )
    p.add_argument(
        "--dtype",
        action="append",
        default=None,
        metavar="DTYPES",
        help="comma-separated subset of %s (default: the dtypes each rule applies to)" % ", ".join(DTYPE_CHOICES),
    )
    p.add_argument(
        "--select",
        action="append",
        default=None,
        metavar="CODES",
        help="comma-separated rule codes or prefixes (TNL1, TNL101); default: all",
    )
    p.add_argument(
        "--format",
        "--output-format",
        dest="format",
        choices=("text", "json", "markdown"),
        default="text",
        help="markdown: the page docs/runtime-results.md is generated from",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="text: verdict lines only, no evidence")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    dtypes = None
    if args.dtype:
        dtypes = [d for v in args.dtype for d in _csv(v)]
        unknown = [d for d in dtypes if d not in DTYPE_CHOICES]
        if unknown:
            print(f"error: unknown dtype {', '.join(unknown)} (choose from {', '.join(DTYPE_CHOICES)})", file=sys.stderr)
            return 2
    select = [c for v in args.select for c in _csv(v)] if args.select else None

    from torchnumlint.runtime_check import runner as v
    from torchnumlint.runtime_check import verify_format as fmt

    device, absent = v.resolve_device(args.device)
    if device is None:  # asked for a device this machine lacks: an error, never a green run
        print(f"error: --device {args.device}: {absent}", file=sys.stderr)
        return 2
    results = v.verify(select=select, device=args.device, dtypes=dtypes)
    if select and not results:
        print(f"error: --select {','.join(select)} matches no rule", file=sys.stderr)
        return 2
    if args.format == "json":
        print(fmt.format_json(results))
    elif args.format == "markdown":
        print(fmt.format_markdown(results, v.describe_device(device)), end="")
    else:
        print(fmt.format_text(results, verbose=not args.quiet))
    return v.exit_code(results)
