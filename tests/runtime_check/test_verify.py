"""Every rule has a reproduction, every reproduction confirms its rule on the CPU, and a fix that
breaks the SAFE claim makes verify fail."""

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchnumlint import catalogue
from torchnumlint.runtime_check import cli, context, linted, runner, verify_format
from torchnumlint.runtime_check.oracles import CONFIRMED, NOT_REPRODUCED, SKIPPED
from torchnumlint.runtime_check.repros import REPROS

PACKAGE = Path(runner.__file__).resolve().parent
RULES = catalogue.load()


def test_every_registered_rule_has_a_reproduction():
    from torchnumlint.rules.registry import registry

    numerical = {code for code, rule in registry().items() if not rule.meta}
    assert numerical != set(registry()), "TNL900 is a rule about comments, with nothing to reproduce"
    missing = sorted(numerical - set(REPROS))
    assert not missing, f"rules without a reproduction in runtime_check/repros/: {missing}"
    assert not sorted(set(REPROS) - set(registry())), "reproductions for rules that do not exist"


ALL = [(code, repro) for code, repros in sorted(REPROS.items()) for repro in repros]


def _id(case):
    return f"{case[0]}-ex{case[1].example + 1}"


@pytest.mark.parametrize("case", ALL, ids=[_id(c) for c in ALL])
def test_reproduction_names_the_example_function_and_its_mathematics(case):
    """Each reproduction runs a real example; a judged fix has a float64 reference to be judged
    against, and an UNSAFE one the bound of its change."""
    code, repro = case
    info = RULES[code]
    assert 0 <= repro.example < len(info.examples)
    ctx = context.ReproContext(info, repro, torch.device("cpu"), repro.dtypes[0], info.examples[repro.example].fixed)
    assert callable(ctx.load("bad"))
    if repro.fixed_from == "fixed":
        assert callable(ctx.load("fixed"))
    if repro.custom is None and repro.oracle in ("NF", "WV", "ERR"):
        assert callable(repro.reference), f"{code}: no float64 reference"
        assert repro.reference.__doc__, f"{code}: say what the reference computes"
        if ctx.fix_safety == "UNSAFE" and repro.oracle != "WV":
            assert repro.bound is not None and repro.bound.why, f"{code}: an UNSAFE fix states its bound"


@pytest.fixture(scope="module")
def cpu_results():
    return runner.verify(device="cpu")


def test_all_reproductions_confirm_on_cpu(cpu_results):
    bad = [(r.code, r.example, r.dtype, r.verdict, r.reason, r.evidence) for r in cpu_results if r.verdict != CONFIRMED]
    assert not bad, bad
    assert {r.code for r in cpu_results} == {code for code, info in RULES.items() if not info.meta}
    assert runner.exit_code(cpu_results) == 0


def test_every_example_is_linted_and_every_reproduced_example_runs(cpu_results):
    rows = {r.code: r for r in cpu_results if r.oracle == "FIX"}
    numerical = {code: info for code, info in RULES.items() if not info.meta}
    assert set(rows) == set(numerical)
    for code, info in numerical.items():
        assert len(rows[code].evidence) == len(info.examples), code
        ran = {r.example for r in cpu_results if r.code == code and r.oracle != "FIX"}
        assert ran == {repro.example + 1 for repro in REPROS[code]}, code


def test_low_precision_dtypes_run_where_they_apply(cpu_results):
    dtypes = {(r.code, r.dtype) for r in cpu_results}
    assert {("TNL101", "float32"), ("TNL101", "float16"), ("TNL101", "bfloat16")} <= dtypes
    for r in cpu_results:
        if r.oracle == "FIX":
            continue
        if r.code == "TNL304":  # a model cast to float16 outright: its hazard is the absence of autocast
            assert r.dtype == "float16", r.code
        elif r.code.startswith("TNL3") and r.example == 1:
            assert r.dtype == "autocast", r.code
        else:
            assert (r.code, "float32") in dtypes


def test_results_carry_numbers(cpu_results):
    tnl101 = next(r for r in cpu_results if r.code == "TNL101" and r.example == 1 and r.dtype == "float32")
    counts = {c.name: c for c in tnl101.numbers["original"]}
    assert counts["grad s2"].nan == 32000 and counts["grad s2"].shape == (2, 32000)
    assert all(c.finite for c in tnl101.numbers["fix"])
    assert "93.6" in tnl101.threshold
    json.dumps(tnl101.as_dict(), allow_nan=False)  # strict JSON: Inf/NaN numbers become strings


def test_where_a_safe_fix_differs_from_the_original_the_output_says_so(cpu_results):
    tnl103 = next(r for r in cpu_results if r.code == "TNL103" and r.example == 1 and r.dtype == "float32")
    said = [e for e in tnl103.evidence if "where the original is not finite" in e]
    assert said and all("matches the reference" in e for e in said), tnl103.evidence


def test_a_fix_that_needs_its_bound_is_within_it_not_matching(cpu_results):
    """TNL112's clamped log-odds are 85 % off the reference: the words say "within the stated
    bound (85%", never "matches the reference"."""
    tnl112 = next(r for r in cpu_results if r.code == "TNL112" and r.example == 1)
    text = " ".join(tnl112.evidence)
    assert "within the stated bound (85%" in text and "matches the reference" not in text, tnl112.evidence


def test_where_the_mathematics_is_undefined_the_convention_is_said(cpu_results):
    said = {
        (r.code, r.example): e
        for r in cpu_results
        for e in r.evidence
        if e.startswith("where the mathematics is undefined, the reference assumes: ")
    }
    assert "fully masked row" in said[("TNL401", 1)] and "uniform" in said[("TNL401", 1)]
    assert "subgradient" in said[("TNL204", 1)]
    assert "zero feature row" in said[("TNL202", 2)]
    assert "constant row" in said[("TNL201", 1)]


METHODS = {
    ("TNL111", 2): "Gated.forward",
    ("TNL114", 2): "Distiller.forward",
    ("TNL202", 2): "Head.forward",
    ("TNL201", 4): "Scaled.forward",
}


def test_method_bound_examples_run_on_an_instance(cpu_results):
    """The examples whose formula is a method of an nn.Module are run as that method of an
    instance, not only compared as text."""
    for (code, example), func in METHODS.items():
        repro = next(r for r in REPROS[code] if r.example == example - 1)
        assert repro.func == func
        runs = [r for r in cpu_results if r.code == code and r.example == example and r.oracle != "FIX"]
        assert runs and all(r.verdict == CONFIRMED for r in runs), (code, example)


def test_every_example_runs_at_further_shapes():
    """A benign input set at another shape or scale for every example with benign inputs; at
    least one 3-D input wherever the example's own inputs allow one."""
    flat = {
        ("TNL104", 2): "(a * b).sum(-1) + (a - b) broadcasts only for 1-D inputs",
        ("TNL113", 3): "softmax(-1) then nll_loss's class dim 1: the same dim only at 2-D",
        ("TNL402", 1): "log_softmax(-1) then nll_loss's class dim 1: the same dim only at 2-D",
        ("TNL401", 2): "h is 3-D already (the pooled dim 1 not last)",
        ("TNL207", 1): "bincount counts 1-D integer labels: no other shape, and labels have no scale",
    }
    for code, repros in REPROS.items():
        for repro in repros:
            if repro.benign is None or repro.custom is not None:
                continue
            where = (code, repro.example + 1)
            assert repro.shapes or where in flat, where
            if where in flat:
                continue
            info = RULES[code]
            ctx = context.ReproContext(info, repro, torch.device("cpu"), repro.dtypes[0])
            widest = max(v.dim() for _, build in repro.shapes for v in build(ctx).values() if isinstance(v, torch.Tensor))
            assert widest >= 3, where


def test_a_hazard_that_does_not_show_is_not_reproduced():
    info = RULES["TNL101"]
    harmless = dataclasses.replace(info.examples[0], bad=info.examples[0].fixed)  # nothing to see
    rules = {"TNL101": dataclasses.replace(info, examples=(harmless,) + info.examples[1:])}
    pinned = lambda info: tuple(linted.Fixed(i, e.fixed, e.fixed) for i, e in enumerate(info.examples))  # noqa: E731
    results = runner.verify(
        select=["TNL101"], device="cpu", dtypes=["float32"], rules=rules, repros={"TNL101": REPROS["TNL101"][:1]}, fixer=pinned
    )
    run = [r for r in results if r.oracle == "NF"]
    assert run[0].verdict == NOT_REPRODUCED and "stays finite" in run[0].reason


def test_rule_without_reproduction_fails():
    results = runner.verify(select=["TNL101"], device="cpu", repros={})
    assert [r.verdict for r in results] == [CONFIRMED, NOT_REPRODUCED]  # the FIX row, then no run
    assert runner.exit_code(results) == 1


def test_select_accepts_prefixes():
    codes = list(RULES)
    assert runner.select_codes(codes, ["TNL1"]) == [c for c in codes if c.startswith("TNL1")]
    assert runner.select_codes(codes, ["tnl101", "TNL2"]) == ["TNL101"] + [c for c in codes if c.startswith("TNL2")]


def test_cuda_is_skipped_when_absent(monkeypatch):
    monkeypatch.setattr(runner.torch.cuda, "is_available", lambda: False)
    results = runner.verify(select=["TNL102"], device="cuda")
    assert [r.verdict for r in results if r.oracle != "FIX"] == [SKIPPED]
    assert "CUDA is not available" in results[-1].reason
    dev, _ = runner.resolve_device("auto")
    assert dev.type == "cpu"


def test_asking_for_cuda_where_it_is_absent_is_an_error(monkeypatch, capsys):
    """`--device cuda` on a machine without CUDA must never read as a green run."""
    monkeypatch.setattr(runner.torch.cuda, "is_available", lambda: False)
    assert cli.main(["--device", "cuda", "--select", "TNL102"]) == 2
    captured = capsys.readouterr()
    assert "CUDA is not available" in captured.err and "CONFIRMED" not in captured.out


def test_cli_exits_nonzero_on_a_wrong_fix(monkeypatch, capsys):
    import torchnumlint.fixes as fixes

    real = fixes.fix_text

    def scaled(*args, **kwargs):
        result = real(*args, **kwargs)
        result.text = result.text.replace("return F.kl_div(", "return 1.01 * F.kl_div(")
        return result

    monkeypatch.setattr(fixes, "fix_text", scaled)
    assert cli.main(["--device", "cpu", "--select", "TNL101", "--dtype", "float32"]) == 1
    assert "FIX FAILED" in capsys.readouterr().out


def test_cli_json_and_dtype_filter(capsys):
    assert cli.main(["--device", "cpu", "--select", "TNL10", "--dtype", "float16", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by = {(r["code"], r["example"], r["dtype"]): r["verdict"] for r in data["results"]}
    assert by[("TNL101", 1, "float16")] == CONFIRMED
    assert by[("TNL102", 1, "float16")] == SKIPPED  # TNL102 is not about precision: float32 only
    assert by[("TNL101", 0, "-")] == CONFIRMED  # the FIX row
    assert data["exit_code"] == 0


def test_cli_usage_errors(capsys):
    assert cli.main(["--select", "TNL999", "--device", "cpu"]) == 2
    assert cli.main(["--dtype", "float8"]) == 2


def test_markdown_records_device_torch_and_every_verdict(capsys):
    assert cli.main(["--device", "cpu", "--select", "TNL102", "--format", "markdown"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("## cpu: ") and torch.__version__ in page
    rows = [line for line in page.splitlines() if line.startswith("| TNL102")]
    assert len(rows) == 1 + len(REPROS["TNL102"]) and all("CONFIRMED" in row for row in rows)


def test_the_results_page_lists_what_verify_runs(cpu_results):
    """docs/runtime-results.md is generated by verify: its CPU section has a row, CONFIRMED, for
    every check a run makes today (regenerate it when a reproduction is added)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "runtime-results.md").read_text()
    cpu = page.split("\n## cpu: ", 1)[1].split("\n## ", 1)[0]
    rows = set()
    for line in cpu.splitlines():
        if line.startswith("| TNL"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows.add((cells[0].split()[0], cells[1], cells[2], cells[5]))
    expected = {(r.code, str(r.example or "all"), r.dtype, r.verdict) for r in cpu_results}
    assert rows == expected


ALLOWED = {"torch", "__future__"}


def _top_level_imports(path):
    tree = ast.parse(path.read_text())
    for node in tree.body:  # module level only: lazy imports inside functions are allowed
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks
            continue


# integrations/ are extras of their own (lightning, hf): each imports its framework, nothing imports them
TORCH_ONLY = sorted(p for p in PACKAGE.rglob("*.py") if "integrations" not in p.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", TORCH_ONLY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_check_imports_only_torch_and_stdlib(path):
    for name in _top_level_imports(path):
        root = name.split(".")[0]
        if root == "torchnumlint":  # itself, and the rules' static view (stdlib only)
            assert name.startswith("torchnumlint.runtime_check") or name == "torchnumlint.catalogue", (path.name, name)
            continue
        assert root in ALLOWED or root in sys.stdlib_module_names, (path.name, name)


def test_importing_runtime_check_does_not_import_libcst_or_click():
    code = (
        "import sys\n"
        "import torchnumlint, torchnumlint.runtime_check as rc\n"
        "assert 'torch' not in sys.modules, 'torch imported eagerly'\n"
        "from torchnumlint import catalogue\n"
        "from torchnumlint.runtime_check import runner, repros, watch, cli, oracles, context, linted, verify_format\n"
        "rc.verify, rc.nan_watch\n"
        "bad = [m for m in ('libcst', 'click', 'torchnumlint.engine', 'torchnumlint.rules') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_quiet_prints_only_verdicts_and_the_full_output_reads_without_the_source(capsys):
    assert cli.main(["--device", "cpu", "--select", "TNL102", "-q"]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[0].startswith("TNL102") and "CONFIRMED" in quiet[0]
    assert not any(line.startswith("    ") for line in quiet), quiet
    assert cli.main(["--device", "cpu", "--select", "TNL102"]) == 0
    full = capsys.readouterr().out
    assert "    inputs:" in full and verify_format.LEGEND in full
