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

from torchnumlint.runtime_check import catalogue, cli, context, runner
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED, NOT_REPRODUCED, SKIPPED
from torchnumlint.runtime_check.repros import REPROS

PACKAGE = Path(runner.__file__).resolve().parent
RULES = catalogue.load()


def test_every_registered_rule_has_a_reproduction():
    from torchnumlint.rules.registry import registry

    missing = sorted(set(registry()) - set(REPROS))
    assert not missing, f"rules without a reproduction in runtime_check/repros/: {missing}"
    assert not sorted(set(REPROS) - set(registry())), "reproductions for rules that do not exist"


@pytest.mark.parametrize("code", sorted(REPROS))
def test_reproduction_names_the_example_function(code):
    repro, info = REPROS[code], RULES[code]
    ctx = context.ReproContext(info, repro, torch.device("cpu"), repro.dtypes[0])
    for side in ("bad", repro.fixed_from):
        if side == "good":
            continue  # GUIDE rules call the good snippet's own function (custom check)
        assert callable(ctx.load(side)), (code, side)


@pytest.fixture(scope="module")
def cpu_results():
    return runner.verify(device="cpu")


def test_all_reproductions_confirm_on_cpu(cpu_results):
    bad = [(r.code, r.dtype, r.verdict, r.reason, r.evidence) for r in cpu_results if r.verdict != CONFIRMED]
    assert not bad, bad
    covered = {r.code for r in cpu_results}
    assert covered == set(RULES)
    assert runner.exit_code(cpu_results) == 0


def test_low_precision_dtypes_run_where_they_apply(cpu_results):
    dtypes = {(r.code, r.dtype) for r in cpu_results}
    assert {("TNL101", "float32"), ("TNL101", "float16"), ("TNL101", "bfloat16")} <= dtypes
    for r in cpu_results:
        if r.code.startswith("TNL3"):
            assert r.dtype == "autocast", r.code
        else:
            assert ("%s" % r.code, "float32") in dtypes


def test_results_carry_numbers(cpu_results):
    tnl101 = next(r for r in cpu_results if r.code == "TNL101" and r.dtype == "float32")
    counts = {c.name: c for c in tnl101.numbers["original"]}
    assert counts["grad s2"].nan == 32000 and counts["grad s2"].shape == (2, 32000)
    assert all(c.finite for c in tnl101.numbers["fix"])
    assert "93.6" in tnl101.threshold
    json.dumps(tnl101.as_dict(), allow_nan=False)  # strict JSON: Inf/NaN numbers become strings


def _with_fixed(code, fixed):
    info = RULES[code]
    first = dataclasses.replace(info.examples[0], fixed=fixed)
    return {**RULES, code: dataclasses.replace(info, examples=(first,) + info.examples[1:])}


TNL101_FIXED = RULES["TNL101"].examples[0].fixed


def test_a_fix_that_changes_finite_values_fails():
    wrong = TNL101_FIXED.replace("return F.kl_div(", "return 1.01 * F.kl_div(")
    assert wrong != TNL101_FIXED
    results = runner.verify(select=["TNL101"], device="cpu", dtypes=["float32"], rules=_with_fixed("TNL101", wrong))
    assert [r.verdict for r in results] == [FIX_FAILED]
    assert "SAFE fix changes values" in results[0].reason
    assert runner.exit_code(results) == 1


def test_a_fix_that_stays_nan_fails():
    still_bad = RULES["TNL101"].examples[0].bad
    results = runner.verify(select=["TNL101"], device="cpu", dtypes=["float32"],
                            rules=_with_fixed("TNL101", still_bad))
    assert [r.verdict for r in results] == [FIX_FAILED]
    assert "not finite" in results[0].reason


def test_cli_exits_nonzero_on_a_wrong_fix(monkeypatch, capsys):
    wrong = TNL101_FIXED.replace("return F.kl_div(", "return 1.01 * F.kl_div(")
    monkeypatch.setattr(catalogue, "load", lambda rules_dir=None: _with_fixed("TNL101", wrong))
    code = cli.main(["--device", "cpu", "--select", "TNL101", "--dtype", "float32"])
    assert code == 1
    assert "FIX FAILED" in capsys.readouterr().out


def test_a_hazard_that_does_not_show_is_not_reproduced():
    harmless = RULES["TNL101"].examples[0].fixed  # the fixed text as the "bad" side: nothing to see
    info = RULES["TNL101"]
    first = dataclasses.replace(info.examples[0], bad=harmless)
    rules = {"TNL101": dataclasses.replace(info, examples=(first,))}
    results = runner.verify(select=["TNL101"], device="cpu", dtypes=["float32"], rules=rules)
    assert results[0].verdict == NOT_REPRODUCED


def test_rule_without_reproduction_fails(monkeypatch):
    results = runner.verify(select=["TNL101"], device="cpu", repros={})
    assert [r.verdict for r in results] == [NOT_REPRODUCED]
    assert runner.exit_code(results) == 1


def test_select_accepts_prefixes():
    codes = list(RULES)
    assert runner.select_codes(codes, ["TNL1"]) == [c for c in codes if c.startswith("TNL1")]
    assert runner.select_codes(codes, ["tnl101", "TNL2"]) == ["TNL101"] + [c for c in codes if c.startswith("TNL2")]


def test_cuda_is_skipped_when_absent(monkeypatch):
    monkeypatch.setattr(runner.torch.cuda, "is_available", lambda: False)
    results = runner.verify(select=["TNL102"], device="cuda")
    assert [r.verdict for r in results] == [SKIPPED]
    assert "CUDA is not available" in results[0].reason
    dev, _ = runner.resolve_device("auto")
    assert dev.type == "cpu"


def test_asking_for_cuda_where_it_is_absent_is_an_error(monkeypatch, capsys):
    """`--device cuda` on a machine without CUDA must never read as a green run."""
    monkeypatch.setattr(runner.torch.cuda, "is_available", lambda: False)
    assert cli.main(["--device", "cuda", "--select", "TNL102"]) == 2
    captured = capsys.readouterr()
    assert "CUDA is not available" in captured.err and "CONFIRMED" not in captured.out


def test_cli_json_and_dtype_filter(capsys):
    assert cli.main(["--device", "cpu", "--select", "TNL10", "--dtype", "float16", "--output-format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by = {(r["code"], r["dtype"]): r["verdict"] for r in data["results"]}
    assert by[("TNL101", "float16")] == CONFIRMED
    assert by[("TNL102", "float16")] == SKIPPED  # TNL102 is not about precision: float32 only
    assert data["exit_code"] == 0


def test_cli_usage_errors(capsys):
    assert cli.main(["--select", "TNL999", "--device", "cpu"]) == 2
    assert cli.main(["--dtype", "float8"]) == 2


def test_port_to_cpu():
    text = 'with torch.autocast("cuda"):\n@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
    text += 's = torch.amp.GradScaler("cuda")\nwith torch.autocast("cuda", dtype=torch.bfloat16):\n'
    ported = context.port_to_cpu(text)
    assert 'torch.autocast("cpu", dtype=torch.float16)' in ported
    assert 'device_type="cpu"' in ported and 'GradScaler("cpu")' in ported
    assert 'torch.autocast("cpu", dtype=torch.bfloat16)' in ported
    assert '"cuda"' not in ported


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


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_check_imports_only_torch_and_stdlib(path):
    for name in _top_level_imports(path):
        root = name.split(".")[0]
        if root == "torchnumlint":
            assert name.startswith("torchnumlint.runtime_check"), (path.name, name)
            continue
        assert root in ALLOWED or root in sys.stdlib_module_names, (path.name, name)


def test_importing_runtime_check_does_not_import_libcst_or_click():
    code = (
        "import sys\n"
        "import torchnumlint, torchnumlint.runtime_check as rc\n"
        "assert 'torch' not in sys.modules, 'torch imported eagerly'\n"
        "from torchnumlint.runtime_check import runner, repros, watch, cli, oracles, catalogue, context\n"
        "rc.verify, rc.nan_watch\n"
        "bad = [m for m in ('libcst', 'click', 'torchnumlint.engine', 'torchnumlint.rules') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_quiet_prints_only_verdicts_and_the_full_output_reads_without_the_source(capsys):
    assert cli.main(["--device", "cpu", "--select", "TNL102", "--quiet"]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[0].startswith("TNL102") and "CONFIRMED" in quiet[0]
    assert not any(line.startswith("    ") for line in quiet), quiet
    assert cli.main(["--device", "cpu", "--select", "TNL102"]) == 0
    full = capsys.readouterr().out
    assert "    inputs:" in full and runner.LEGEND in full
