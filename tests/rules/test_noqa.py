"""TNL900 unused-noqa: stale and misspelled `# noqa: TNL...` codes are reported and removed by the
safe fix, the rest of the comment kept; codes of rules not enabled, other tools' codes and bare
noqa are left alone; through the engine, the fixer and the command line."""

import subprocess
import sys
import textwrap

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint.engine import lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.rules.registry import registry

CODE = "TNL900"

FLAGGED = [
    # fixed by hand long ago: the noqa stayed behind
    Flagged(
        """\
        import torch

        def log_probs(logits):
            return torch.log_softmax(logits, dim=-1)  # noqa: TNL103
        """,
        (4,),
        """\
        import torch

        def log_probs(logits):
            return torch.log_softmax(logits, dim=-1)
        """,
        enabled=("TNL103",),
        message="TNL103 found nothing here",
    ),
    # one code used, one not: only the unused one goes
    Flagged(
        """\
        import torch

        def log_probs(logits):
            return torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL104, TNL103
        """,
        (4,),
        """\
        import torch

        def log_probs(logits):
            return torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL103
        """,
        enabled=("TNL103", "TNL104"),
    ),
    # other tools' codes stay, in their spelling
    Flagged(
        """\
        import torch

        def loss(logits, y):
            return torch.nn.functional.cross_entropy(logits, y)  # NOQA:E501,tnl113
        """,
        (4,),
        """\
        import torch

        def loss(logits, y):
            return torch.nn.functional.cross_entropy(logits, y)  # NOQA:E501
        """,
        enabled=("TNL113",),
    ),
    # the comment's own text stays
    Flagged(
        """\
        import torch

        def log_probs(logits):
            out = torch.log_softmax(logits, dim=-1)  # type: ignore  # noqa: TNL103
            return out  # noqa: TNL103 kept from the old softmax
        """,
        (4, 5),
        """\
        import torch

        def log_probs(logits):
            out = torch.log_softmax(logits, dim=-1)  # type: ignore
            return out  # kept from the old softmax
        """,
        enabled=("TNL103",),
    ),
    # a file-wide exemption that exempts nothing goes with its line
    Flagged(
        """\
        # torchnumlint: noqa: TNL104
        import torch

        def gate(x):
            return torch.sigmoid(x)
        """,
        (1,),
        """\
        import torch

        def gate(x):
            return torch.sigmoid(x)
        """,
        enabled=("TNL104",),
        message="in this file",
    ),
    # a misspelled code suppresses nothing, whatever is enabled
    Flagged(
        """\
        import torch

        def log_probs(logits):
            return torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL103, TNL310
        """,
        (4,),
        """\
        import torch

        def log_probs(logits):
            return torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL103
        """,
        enabled=("TNL103",),
        message="TNL310 is not a rule",
    ),
]

SILENT = [
    # the noqa silences a finding
    Silent(
        """\
        import torch

        def log_probs(logits):
            return torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL103
        """,
        together=("TNL103",),
    ),
    # on the first line of a multi-line statement whose finding is on its last
    Silent(
        """\
        import torch

        def log_probs(logits):
            return torch.log(  # noqa: TNL103
                torch.softmax(logits, dim=-1)
            )
        """,
        together=("TNL103",),
    ),
    # a file-wide exemption in use
    Silent(
        """\
        # torchnumlint: noqa: TNL103
        import torch

        def log_probs(logits):
            return torch.log(torch.softmax(logits, dim=-1))
        """,
        together=("TNL103",),
    ),
    # TNL201 is not enabled in this run: its noqa cannot be judged
    Silent(
        """\
        import torch

        def norm(x):
            return x / x.sum()  # noqa: TNL201
        """,
        together=("TNL103",),
    ),
    # bare noqa and other tools' codes are not ours to judge
    Silent(
        """\
        import torch

        def log_probs(logits):
            a = torch.log_softmax(logits, dim=-1)  # noqa
            return a  # noqa: E501, F841
        """,
        together=("TNL103",),
    ),
    # the stale code is kept on purpose: TNL900 itself is suppressed on that line
    Silent(
        """\
        import torch

        def log_probs(logits):
            return torch.log_softmax(logits, dim=-1)  # noqa: TNL103, TNL900
        """,
        together=("TNL103",),
    ),
    # "# noqa" inside a string is no comment
    Silent(
        """\
        import torch

        def describe(logits):
            return "torch.log_softmax  # noqa: TNL103"
        """,
        together=("TNL103",),
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_unused_noqa(code, case):
    harness.check(code, case)


def test_a_file_that_never_imports_torch_suppresses_nothing():
    """Such a file is never linted (no rule reaches the walk), but its noqa codes are still judged."""
    source = "import numpy as np\n\ndef f(p):\n    return np.sqrt(p)  # noqa: TNL206\n"
    rules = [registry()["TNL900"], registry()["TNL206"]]
    assert [(f.code, f.line, f.col) for f in lint_text("f.py", source, rules)] == [("TNL900", 4, 24)]
    assert fix_text("f.py", source, rules).text == source.replace("  # noqa: TNL206", "")


def test_off_by_default_and_fixed_from_the_command_line(tmp_path):
    """The CLI as a user runs it: not reported by default; with `--extend-select TNL900` reported
    at the directive's column and removed by plain `--fix`, the used noqa kept."""
    path = tmp_path / "train.py"
    source = textwrap.dedent(
        """\
        import torch

        def step(logits):
            a = torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL103
            b = torch.log_softmax(logits, dim=-1)  # noqa: TNL103
            return a + b
        """
    )
    path.write_text(source)

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "torchnumlint", *args, "--no-cache", str(path)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    assert cli().returncode == 0
    found = cli("--extend-select", "TNL900", "--output-format", "json")
    assert found.returncode == 1, found.stderr
    assert '"TNL900"' in found.stdout and found.stdout.count('"code"') == 1
    text = cli("--extend-select", "TNL900")
    assert "train.py:5:44: TNL900" in text.stdout, text.stdout
    fixed = cli("--extend-select", "TNL900", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert path.read_text() == source.replace("dim=-1)  # noqa: TNL103\n    return", "dim=-1)\n    return")
