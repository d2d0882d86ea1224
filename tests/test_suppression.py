import textwrap

from tests.conftest import lint

BAD = 'F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean")'


def src(body):
    return "import torch.nn.functional as F\ndef f(a, b):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def test_line_noqa_with_the_code_suppresses():
    assert lint(src(f"return {BAD}  # noqa: TNL101\n"), "TNL101") == []


def test_bare_noqa_suppresses_everything():
    assert lint(src(f"return {BAD}  # noqa\n"), "TNL101") == []


def test_noqa_for_another_code_does_not_suppress():
    assert lint(src(f"return {BAD}  # noqa: E501\n"), "TNL101") == [("TNL101", 3)]
    assert lint(src(f"return {BAD}  # noqa: TNL102\n"), "TNL101") == [("TNL101", 3)]


def test_several_codes_and_case():
    assert lint(src(f"return {BAD}  # NOQA:E501,TNL101\n"), "TNL101") == []


def test_noqa_on_first_or_last_line_of_a_multiline_statement():
    body = """
    loss = F.kl_div(
        F.log_softmax(a, -1),
        F.softmax(b, -1),
        reduction="batchmean",
    ){}
    """
    first = 'loss = F.kl_div(  # noqa: TNL101\n    F.log_softmax(a, -1),\n    F.softmax(b, -1),\n    reduction="batchmean",\n)\n'
    assert lint(src(first), "TNL101") == []
    assert lint(src(body.format("  # noqa: TNL101")), "TNL101") == []
    assert lint(src(body.format("")), "TNL101") == [("TNL101", 6)]


def test_noqa_inside_a_string_is_not_a_comment():
    assert lint(src(f'return {BAD}, "# noqa"\n'), "TNL101") == [("TNL101", 3)]


def test_file_level_suppression():
    assert lint("# torchnumlint: noqa\n" + src(f"return {BAD}\n"), "TNL101") == []
    assert lint("# torchnumlint: noqa: TNL101\n" + src(f"return {BAD}\n"), "TNL101") == []
    assert lint("# torchnumlint: noqa: TNL102\n" + src(f"return {BAD}\n"), "TNL101") == [("TNL101", 4)]


def test_noqa_in_a_block_body_does_not_hide_its_header():
    code = "import torch\ndef f(x):\n    if torch.log(torch.sigmoid(x)).mean() > 0:\n        return 1  # noqa\n    return 0\n"
    assert lint(code, "TNL104") == [("TNL104", 3)]


def test_file_noqa_after_code_exempts_that_line_only():
    code = src(f"a = {BAD}  # torchnumlint: noqa\nreturn {BAD}\n")
    assert lint(code, "TNL101") == [("TNL101", 4)]


def test_a_prefix_covers_the_codes_it_begins_as_flake8_reads_it():
    assert lint(src(f"return {BAD}  # noqa: TNL1\n"), "TNL101") == []
    assert lint(src(f"return {BAD}  # noqa: TNL10\n"), "TNL101") == []
    assert lint(src(f"return {BAD}  # noqa: TNL2\n"), "TNL101") == [("TNL101", 3)]
    assert lint(src(f"return {BAD}  # noqa: TNL1011\n"), "TNL101") == [("TNL101", 3)]


def test_flake8_file_level_noqa():
    assert lint("# flake8: noqa\n" + src(f"return {BAD}\n"), "TNL101") == []
    assert lint("# flake8: noqa: TNL101\n" + src(f"return {BAD}\n"), "TNL101") == []
    assert lint("# flake8: noqa: TNL102\n" + src(f"return {BAD}\n"), "TNL101") == [("TNL101", 4)]
