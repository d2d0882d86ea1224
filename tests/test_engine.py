"""Engine mechanics: name resolution, name following, positions, fixes to a fixpoint, imports."""

import textwrap
import weakref

import libcst as cst
import pytest

from torchnumlint.engine import ParseError, candidate_rules, lint_text
from torchnumlint.fixes import apply_fixes, fix_text
from torchnumlint.findings import Edit, Finding, Fix, Safety
from torchnumlint.rules.registry import registry
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.imports import ImportMap

from tests.conftest import fixed, lint

KL = [registry()["TNL101"]]


def qual(code, expr):
    module = cst.parse_module(textwrap.dedent(code))
    return ImportMap(module).qualname(cst.parse_expression(expr))


@pytest.mark.parametrize(
    "imports, expr",
    [
        ("import torch.nn.functional as F", "F.softmax"),
        ("from torch.nn import functional as F", "F.softmax"),
        ("from torch import nn", "nn.functional.softmax"),
        ("import torch", "torch.nn.functional.softmax"),
        ("from torch.nn.functional import softmax", "softmax"),
        ("from torch.nn.functional import softmax as sm", "sm"),
        ("import torch.nn as nn", "nn.functional.softmax"),
    ],
)
def test_every_import_form_resolves_to_one_name(imports, expr):
    assert qual(imports, expr) == "torch.nn.functional.softmax"


def test_unimported_names_do_not_resolve():
    assert qual("import numpy as np", "np.log") == "numpy.log"
    assert qual("", "softmax") is None
    assert qual("", "torch.log") == "torch.log"  # torch without a visible import is still torch


def test_function_and_method_forms_match_the_same_op():
    imports = ImportMap(cst.parse_module("import torch\nimport math\n"))
    for code in ("torch.softmax(x, -1)", "x.softmax(-1)", "torch.special.softmax(x, dim=-1)"):
        match = match_call(imports, cst.parse_expression(code), "softmax")
        assert match is not None and cst.Module([]).code_for_node(match.input) == "x"
        assert cst.Module([]).code_for_node(match.arg("dim")) in ("-1",)
    assert match_call(imports, cst.parse_expression("math.log(x)"), "log") is None
    assert match_call(imports, cst.parse_expression('self.log("loss", v)'), "log") is None
    assert match_call(imports, cst.parse_expression("x.log()"), "log") is not None


def test_a_name_is_followed_to_its_single_assignment():
    code = """
        import torch.nn.functional as F
        def f(a, b):
            p = F.softmax(b, dim=-1)
            return F.kl_div(F.log_softmax(a, dim=-1), p, reduction="batchmean")
    """
    assert lint(code, "TNL101") == [("TNL101", 5)]


def test_a_reassignment_in_between_breaks_the_chain():
    code = """
        import torch.nn.functional as F
        def f(a, b):
            p = F.softmax(b, dim=-1)
            p = p.detach()
            return F.kl_div(F.log_softmax(a, dim=-1), p, reduction="batchmean")
    """
    assert lint(code, "TNL101") == []


def test_an_in_place_update_breaks_the_chain():
    code = """
        import torch.nn.functional as F
        def f(a, b, m):
            p = F.softmax(b, dim=-1)
            p.mul_(m)
            return F.kl_div(F.log_softmax(a, dim=-1), p, reduction="batchmean")
    """
    assert lint(code, "TNL101") == []


def test_the_value_read_is_the_one_before_the_assignment():
    code = """
        import torch.nn.functional as F
        def f(a, p):
            p = F.kl_div(F.log_softmax(a, dim=-1), p, reduction="batchmean")
            return p
    """
    assert lint(code, "TNL101") == []


def test_names_in_another_function_are_not_followed():
    code = """
        import torch.nn.functional as F
        def g(b):
            p = F.softmax(b, dim=-1)
            return p
        def f(a, p):
            return F.kl_div(F.log_softmax(a, dim=-1), p, reduction="batchmean")
    """
    assert lint(code, "TNL101") == []


def test_a_name_used_twice_is_reported_but_not_rewritten():
    code = """
        import torch.nn.functional as F
        def f(a, b):
            p = F.softmax(b, dim=-1)
            loss = F.kl_div(F.log_softmax(a, dim=-1), p, reduction="batchmean")
            return loss, p.argmax(-1)
    """
    assert lint(code, "TNL101") == [("TNL101", 5)]
    assert fixed(code, "TNL101") == textwrap.dedent(code)


def test_self_attribute_criterion_is_followed_across_methods():
    code = """
        import torch.nn as nn
        import torch.nn.functional as F
        class Distill(nn.Module):
            def __init__(self):
                super().__init__()
                self.kl = nn.KLDivLoss(reduction="batchmean")
            def forward(self, s, t):
                return self.kl(F.log_softmax(s, -1), F.softmax(t, -1))
    """
    assert lint(code, "TNL101") == [("TNL101", 9)]


def test_no_grad_decorator_and_block():
    code = """
        import torch
        import torch.nn.functional as F
        @torch.no_grad()
        def evaluate(a, b):
            return F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean")
        def f(a, b):
            with torch.inference_mode():
                return F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean")
    """
    assert lint(code, "TNL101") == []


def test_multiline_call_keeps_its_layout_when_fixed():
    code = """
        import torch.nn.functional as F
        def f(a, b):
            return F.kl_div(
                F.log_softmax(a, dim=-1),
                F.softmax(b, dim=-1),  # teacher
                reduction="batchmean",
            )
    """
    assert fixed(code, "TNL101") == textwrap.dedent(
        """
        import torch.nn.functional as F
        def f(a, b):
            return F.kl_div(
                F.log_softmax(a, dim=-1),
                F.log_softmax(b, dim=-1),  # teacher
                reduction="batchmean",
                log_target=True,
            )
    """
    )


def test_fix_adds_an_import_only_when_none_exists():
    code = 'from torch.nn.functional import kl_div, softmax\nfrom torch.nn.functional import log_softmax as ls\n\ndef f(a, b):\n    return kl_div(ls(a, 1), softmax(b, 1), reduction="batchmean")\n'
    out = fixed(code, "TNL101")
    assert "ls(b, 1)" in out and out.count("import") == 2
    code2 = 'from torch.nn.functional import kl_div, softmax\n\ndef f(a, b):\n    return kl_div(a, softmax(b, 1), reduction="batchmean")\n'
    out2 = fixed(code2, "TNL101")
    assert out2.splitlines()[1] == "import torch.nn.functional as F"
    assert "F.log_softmax(b, 1)" in out2
    assert lint(out2, "TNL101") == []


def test_positions_are_one_based_and_cover_the_node():
    code = 'import torch.nn.functional as F\ndef f(a, b):\n    return F.kl_div(a, F.softmax(b, -1), reduction="batchmean")\n'
    (finding,) = lint_text("x.py", code, KL)
    assert (finding.line, finding.col, finding.end_line, finding.end_col) == (3, 24, 3, 40)
    assert finding.fix is not None and finding.fix.safety is Safety.SAFE


def test_crlf_and_unicode_survive_a_fix():
    code = '# héllo ✓\r\nimport torch.nn.functional as F\r\ndef f(a, b):\r\n    return F.kl_div(a, F.softmax(b, -1), reduction="batchmean")  # ü\r\n'
    out = fix_text("x.py", code, KL).text
    assert out == code.replace('F.softmax(b, -1), reduction="batchmean"', 'F.log_softmax(b, -1), reduction="batchmean", log_target=True')


def test_syntax_errors_raise_parse_error_with_position():
    with pytest.raises(ParseError, match="line 3"):
        lint_text("x.py", "import torch\nx = torch.log(1)\ndef (:\n", [r for r in registry().values()])
    with pytest.raises(ParseError):  # files no rule wants are still syntax-checked
        lint_text("x.py", "def (:\n", KL)


def test_prefilter_skips_files_without_needles():
    assert candidate_rules("import os\n", KL) == []
    assert candidate_rules("import torch.nn.functional as F\nx = F.kl_div(a, b)", KL) == KL


def test_files_that_never_import_torch_get_no_finding():
    """numpy and plain-Python code has `.sum()`, `.std()` and `log` too: not torch code."""
    code = "import numpy as np\ndef z(x, labels):\n    return (x * (labels == 3)).sum() / (labels == 3).sum() + np.log(x.sum())\n"
    assert lint_text("x.py", code, list(registry().values())) == []
    assert candidate_rules(code, list(registry().values())) == []
    assert lint_text("x.py", "import torch\n" + code, list(registry().values()))


def _finding(*edits):
    return Finding("TNL999", "t", "m", "x.py", 1, 1, 1, 1, Fix(tuple(edits), Safety.SAFE))


def test_overlapping_fixes_wait_for_the_next_pass():
    text = "abcdef"
    out, count = apply_fixes(text, [_finding(Edit(0, 3, "X")), _finding(Edit(2, 4, "Y")), _finding(Edit(4, 6, "Z"))])
    assert (out, count) == ("XdZ", 2)


def test_identical_import_insertions_are_applied_once():
    text = "ab"
    imp = Edit(0, 0, "import torch\n")
    out, count = apply_fixes(text, [_finding(imp, Edit(1, 2, "B")), _finding(imp, Edit(0, 1, "A"))])
    assert out == "import torch\nAB" and count == 2


def test_a_comment_on_the_last_argument_stays_on_its_line():
    code = """
        import torch.nn.functional as F
        def f(a, b):
            return F.kl_div(
                a,
                F.softmax(b, dim=-1),
                reduction="batchmean",  # mean over the batch
            )
    """
    assert fixed(code, "TNL101") == textwrap.dedent(
        """
        import torch.nn.functional as F
        def f(a, b):
            return F.kl_div(
                a,
                F.log_softmax(b, dim=-1),
                reduction="batchmean",  # mean over the batch
                log_target=True,
            )
    """
    )


def test_a_new_alias_never_shadows_a_name_the_file_uses():
    code = "from torch import log, sigmoid\n\nF = 96\n\n\ndef f(x):\n    return log(sigmoid(x)) * F\n"
    out = fixed(code, "TNL104")
    assert "torch.nn.functional.logsigmoid(x) * F" in out and "import torch\n" in out
    assert "as F" not in out


def test_imports_under_type_checking_are_not_used_by_fixes():
    code = (
        "from typing import TYPE_CHECKING\nimport torch\nif TYPE_CHECKING:\n    import torch.nn.functional as F\n\n\n"
        "def f(x):\n    return torch.log(torch.sigmoid(x))\n"
    )
    out = fixed(code, "TNL104")
    assert "return torch.nn.functional.logsigmoid(x)" in out


def test_a_file_libcst_cannot_reprint_exactly_gets_findings_but_no_fix():
    code = "import torch\n\n\fscaler = torch.cuda.amp.GradScaler()\n"
    found = lint_text("x.py", code, [registry()["TNL306"]])
    assert [f.code for f in found] == ["TNL306"] and found[0].fix is None
    assert fix_text("x.py", code, [registry()["TNL306"]]).text == code


def test_an_import_goes_on_its_own_line_at_a_last_line_without_newline():
    code = "if 1: y = log(sigmoid(x))\nfrom torch import log, sigmoid"
    out = fixed(code, "TNL104")
    assert out == "if 1: y = F.logsigmoid(x)\nfrom torch import log, sigmoid\nimport torch.nn.functional as F"


def test_a_multiline_decorator_keeps_its_indentation():
    code = textwrap.dedent("""\
        import torch


        class Fn(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(
                device_type="cuda",
            )
            def forward(ctx, x):
                return x * x


        def step(x):
            with torch.autocast("cuda"):
                return Fn.apply(x)
    """)
    out = fixed(code, "TNL301")
    assert '    @torch.amp.custom_fwd(\n        device_type="cuda",\n        cast_inputs=torch.float32,\n    )\n' in out


def test_a_statement_nested_too_deeply_is_skipped_with_a_warning_and_the_rest_linted():
    code = "import torch\nx = torch.log(torch.sigmoid(" + "a+" * 3000 + "a))\ny = torch.log(torch.sigmoid(b))\n"
    warnings = []
    findings = lint_text("x.py", code, [registry()["TNL104"]], warnings=warnings)
    assert [f.line for f in findings] == [3]
    assert warnings == ["line 2: statement nested too deeply to analyse (depth 3004 > 1500); skipped, the rest of the file is linted"]


def test_module_level_ifs_of_any_shape_are_read():
    code = "import sys\nif sys.modules[__name__].flag:\n    import torch\nif TYPE_CHECKING:\n    pass\n"
    assert lint(code + "x = torch.log(torch.sigmoid(y))\n", "TNL104") == [("TNL104", 6)]


def test_a_name_imported_from_two_places_is_never_resolved_to_one():
    """Which `F` a run sees depends on the branch taken: no finding, and so no fix rewriting it
    as torch's; the same name imported twice from one place is still followed."""
    two_places = (
        "import torch\n"
        "try:\n"
        "    import torch.nn.functional as F\n"
        "except ImportError:\n"
        "    import other.functional as F\n"
        "def loss(a):\n"
        "    return torch.log(F.softmax(a, -1))\n"
    )
    rules = list(registry().values())
    assert lint_text("x.py", two_places, rules) == []
    one_place = two_places.replace("other.functional", "torch.nn.functional")
    assert [f.code for f in lint_text("x.py", one_place, rules)] == ["TNL103"]


def test_cpythons_tree_is_freed_before_libcst_parses(monkeypatch):
    """A large file's peak is LibCST's tree, not LibCST's and CPython's together."""
    from torchnumlint import engine

    trees, alive = [], []
    check_syntax, parse_module = engine.check_syntax, engine.cst.parse_module

    def checked(text, path):
        tree = check_syntax(text, path)
        trees.append(weakref.ref(tree))
        return tree

    monkeypatch.setattr(engine, "check_syntax", checked)
    monkeypatch.setattr(engine.cst, "parse_module", lambda text: alive.append(trees[0]() is not None) or parse_module(text))
    findings = lint_text("x.py", "import torch\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n", list(registry().values()))
    assert [f.code for f in findings] == ["TNL103"] and alive == [False]
