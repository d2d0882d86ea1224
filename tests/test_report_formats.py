"""Every output format, rendered from a real run (`runner.run` over files on disk) and read back the
way its consumer reads it: SARIF validated against the official schema and its fixes applied,
GitHub annotations parsed as the runner parses them, GitLab and JUnit reports parsed, the text
format's markers and diffs checked against the file."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchnumlint.catalogue import load as load_catalogue
from torchnumlint.config import Overrides, Settings
from torchnumlint.findings import Edit, Finding, Fix, Safety
from torchnumlint.report import FORMATS, concise, github, gitlab, json_output, junit, sarif, text
from torchnumlint.report.snippet import Text, fix_diff, snippet
from torchnumlint.results import Options, RunResult
from torchnumlint.runner import run

SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "sarif-schema-2.1.0.json"

TRAIN = """import torch
import torch.nn.functional as F


def distill_loss(s1, s2):
    return F.kl_div(F.log_softmax(s1, dim=-1), F.softmax(s2, dim=-1), reduction="batchmean")


def wrong_input(a, t):
    return F.kl_div(F.softmax(a, dim=-1), t, reduction="batchmean")
"""
BROKEN = "import torch\nx = (1,\n"
MACHINE = ("json", "sarif", "github", "gitlab", "junit")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "broken.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lint(*paths: str) -> RunResult:
    return run(list(paths), Settings(Overrides(), None), options=Options())


def finding(**changes) -> Finding:
    values = dict(code="TNL101", name="kl-div-prob-target", message="m", path="a.py", line=1, col=1, end_line=1, end_col=2)
    values.update(changes)
    return Finding(**values)


def test_every_format_is_registered():
    assert set(FORMATS) == {"text", "concise", "json", "sarif", "github", "gitlab", "junit"}


@pytest.mark.parametrize("name", MACHINE)
def test_a_file_that_cannot_be_parsed_is_in_every_machine_format(project, name):
    result = lint(".")
    assert [e.split(":")[0] for e in result.errors] == ["broken.py"]
    output = FORMATS[name](result, Options())
    assert "broken.py" in output and "cannot parse" in output


# text and concise


def test_concise_is_one_line_per_finding_then_the_summary(project):
    lines = concise.render(lint("train.py"), Options()).splitlines()
    assert lines[0].startswith("train.py:6:48: TNL101 ") and lines[0].endswith("[*]")
    assert lines[1].startswith("train.py:10:21: TNL102 ") and not lines[1].endswith("[*]")
    assert lines[2] == "Found 2 findings (1 fixable with --fix, 1 more with --unsafe-fixes)."
    assert len(lines) == 3


def test_text_shows_the_line_a_marker_under_the_span_and_the_fix_as_a_diff(project):
    result = lint("train.py")
    out = text.render(result, Options()).splitlines()
    first = result.findings[0]
    start = out.index(concise.headline(first, Options()))
    source_line = TRAIN.splitlines()[first.line - 1]
    assert out[start + 2] == f"{first.line} | {source_line}"
    marker = out[start + 3]
    assert marker.endswith(" TNL101")
    carets = marker[len("  | ") : -len(" TNL101")]
    assert carets.strip() == "^" * (first.end_col - first.col)
    assert source_line[len(carets) - len(carets.lstrip()) :][: first.end_col - first.col] == "F.softmax(s2, dim=-1)"
    # the diff is the fix: applying it to the file gives the '+' line
    minus = out.index("  = safe fix (--fix):", start) + 1
    assert out[minus] == f"      6 - {source_line}"
    assert out[minus + 1] == (
        '      6 +     return F.kl_div(F.log_softmax(s1, dim=-1), F.log_softmax(s2, dim=-1), reduction="batchmean", log_target=True)'
    )
    assert "  = unsafe fix (--unsafe-fixes):" in out
    assert out[-1] == "Found 2 findings (1 fixable with --fix, 1 more with --unsafe-fixes)."


def test_text_numbers_an_inserted_line_in_the_fixed_file():
    source = "import torch\n\ny = 1\n"
    fix = Fix((Edit(13, 13, "import math\n", (2, 1), (2, 1)), Edit(18, 19, "2", (3, 5), (3, 6))), Safety.SAFE)
    lines = fix_diff(finding(line=3, col=5, end_line=3, end_col=6, fix=fix), Text(source))
    assert lines == ["  = safe fix (--fix):", "      2 + import math", "      3 - y = 1", "      4 + y = 2"]


def test_markers_line_up_under_tabs_and_wide_characters():
    source = "\tx = '漢字' + torch.log(p)\n"
    col = source.index("torch") + 1
    lines = snippet(finding(line=1, col=col, end_col=col + len("torch.log(p)")), Text(source))
    assert lines[1] == "1 | \tx = '漢字' + torch.log(p)"
    assert lines[2] == "  | \t" + " " * len("x = '") + "    " + " " * len("' + ") + "^" * 12 + " TNL101"


def test_a_long_span_shows_its_first_and_last_lines():
    source = "y = f(\n    a,\n    b,\n    c,\n    d,\n)\n"
    lines = snippet(finding(line=1, col=5, end_line=6, end_col=2), Text(source))
    assert [line.split("|")[0].strip() for line in lines if "|" in line and line.split("|")[0].strip()] == ["1", "2", "5", "6"]
    assert "  :" in lines


def test_text_shows_no_source_from_a_file_changed_since_the_run(project):
    result = lint("train.py")
    (project / "train.py").write_text("import torch\n")
    out = text.render(result, Options())
    assert "|" not in out and "fix (" not in out
    assert concise.headline(result.findings[0], Options()) in out.splitlines()


def test_statistics_are_the_same_table_in_text_and_concise(project):
    result = lint("train.py")
    table = text.render(result, Options(), statistics=True)
    assert table == concise.render(result, Options(), statistics=True)
    assert table.splitlines()[0] == "    1  TNL101  [*] kl-div-prob-target"


# json


def test_json_gives_an_error_as_an_item_without_a_code(project):
    items = json.loads(json_output.render(lint("."), Options()))
    error = [item for item in items if item["code"] is None]
    assert error == [
        {
            "code": None,
            "name": None,
            "message": "cannot parse: line 2, column 5: '(' was never closed",
            "filename": "broken.py",
            "location": {"row": 2, "column": 5},
            "end_location": {"row": 2, "column": 5},
            "fix": None,
        }
    ]


# SARIF


def sarif_of(result: RunResult) -> dict:
    return json.loads(sarif.render(result, Options()))


def test_sarif_validates_against_the_official_schema(project):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (dev extra): SARIF not validated")
    if not SCHEMA.is_file():
        pytest.skip(f"SARIF not validated: the official schema is absent ({SCHEMA})")
    log = sarif_of(lint("."))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"][0]["results"]) == 2


def test_sarif_rules_carry_help_and_default_state(project):
    driver = sarif_of(lint("train.py"))["runs"][0]["tool"]["driver"]
    catalogue = load_catalogue()
    assert [rule["id"] for rule in driver["rules"]] == list(catalogue)
    for rule in driver["rules"]:
        info = catalogue[rule["id"]]
        assert rule["fullDescription"]["text"] == info.rationale and info.rationale
        assert rule["help"]["text"].startswith(info.rationale)
        assert rule["defaultConfiguration"] == {"level": "error", "enabled": info.default}
    assert any(not rule["defaultConfiguration"]["enabled"] for rule in driver["rules"])


def apply_replacements(source: str, replacements) -> str:
    """Apply SARIF replacements (1-based lines, code point columns, exclusive ends) to `source`."""
    starts = [0] + [m.end() for m in re.finditer("\n", source)]

    def offset(line, col):
        return starts[line - 1] + col - 1

    for rep in sorted(replacements, key=lambda r: (r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]), reverse=True):
        region = rep["deletedRegion"]
        a, b = offset(region["startLine"], region["startColumn"]), offset(region["endLine"], region["endColumn"])
        source = source[:a] + rep.get("insertedContent", {}).get("text", "") + source[b:]
    return source


def test_sarif_results_have_regions_and_fixes_that_do_what_fix_does(project):
    result = lint("train.py")
    log = sarif_of(result)
    run_ = log["runs"][0]
    first = run_["results"][0]
    assert first["ruleId"] == "TNL101"
    assert run_["tool"]["driver"]["rules"][first["ruleIndex"]]["id"] == "TNL101"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 6, "startColumn": 48, "endLine": 6, "endColumn": 69}
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    change = first["fixes"][0]["artifactChanges"][0]
    fixed = apply_replacements(TRAIN, change["replacements"])
    assert 'F.log_softmax(s2, dim=-1), reduction="batchmean", log_target=True)' in fixed
    run(["train.py"], Settings(Overrides(), None), options=Options(fix=True))
    assert (project / "train.py").read_text() == fixed


def test_sarif_errors_are_notifications_of_a_failed_invocation(project):
    invocation = sarif_of(lint("."))["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    assert note["locations"][0]["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 5}
    assert sarif_of(lint("train.py"))["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_sarif_absolute_paths_are_file_uris(project):
    result = lint(str(project / "train.py"))
    uri = sarif_of(result)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": (project / "train.py").as_uri()}


# GitHub


def parse_workflow_command(line: str):
    """Read `::error k=v,...::message` as the Actions runner does (its escapes undone)."""
    match = re.fullmatch(r"::(\w+) (.*?)::(.*)", line)
    assert match, line

    def unescape(value):
        return value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")

    properties = dict(pair.split("=", 1) for pair in match.group(2).split(","))
    return match.group(1), {k: unescape(v) for k, v in properties.items()}, unescape(match.group(3))


def test_github_annotations_point_at_the_span(project):
    lines = github.render(lint("."), Options()).splitlines()
    kind, props, message = parse_workflow_command(lines[0])
    assert kind == "error"
    assert props == {"title": "torchnumlint (TNL101)", "file": "train.py", "line": "6", "col": "48", "endLine": "6", "endColumn": "69"}
    assert message.startswith("train.py:6:48: TNL101 ") and message.endswith("[*]")
    kind, props, message = parse_workflow_command(lines[-1])
    assert props["file"] == "broken.py" and props["line"] == "2" and "cannot parse" in message
    assert len(lines) == 3


def test_github_escapes_what_the_runner_would_split_on():
    result = RunResult(findings=[finding(path="dir,x/a:b.py", message="50% of rows\nare: bad, then")])
    _, props, message = parse_workflow_command(github.render(result, Options()))
    assert props["file"] == "dir,x/a:b.py"
    assert message == "dir,x/a:b.py:1:1: TNL101 50% of rows\nare: bad, then"


# GitLab


def test_gitlab_code_quality_issues(project):
    issues = json.loads(gitlab.render(lint("."), Options()))
    assert [i["check_name"] for i in issues] == ["TNL101", "TNL102", "torchnumlint-error"]
    first = issues[0]
    assert first["location"] == {"path": "train.py", "positions": {"begin": {"line": 6, "column": 48}, "end": {"line": 6, "column": 69}}}
    assert first["severity"] == "major" and first["description"].startswith("TNL101 ")
    assert issues[2]["severity"] == "critical" and issues[2]["location"]["path"] == "broken.py"
    assert len({i["fingerprint"] for i in issues}) == 3


def test_gitlab_fingerprints_survive_code_added_above(project):
    before = [i["fingerprint"] for i in json.loads(gitlab.render(lint("train.py"), Options()))]
    (project / "train.py").write_text("# a comment\n\n" + TRAIN)
    after = json.loads(gitlab.render(lint("train.py"), Options()))
    assert [i["fingerprint"] for i in after] == before
    assert after[0]["location"]["positions"]["begin"]["line"] == 8


def test_gitlab_paths_are_relative_to_the_project(project, monkeypatch):
    monkeypatch.setenv("CI_PROJECT_DIR", str(project))
    issues = json.loads(gitlab.render(lint(str(project / "train.py")), Options()))
    assert issues[0]["location"]["path"] == "train.py"


def test_gitlab_identical_findings_get_distinct_fingerprints():
    twice = RunResult(findings=[finding(line=1), finding(line=2)])
    issues = json.loads(gitlab.render(twice, Options()))
    assert issues[0]["fingerprint"] != issues[1]["fingerprint"]


# JUnit


def test_junit_one_suite_per_file_failures_and_errors(project):
    root = ET.fromstring(junit.render(lint("."), Options()))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "2", "1")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"train.py", "broken.py"}
    cases = suites["train.py"].findall("testcase")
    assert [c.get("name") for c in cases] == ["torchnumlint.TNL101", "torchnumlint.TNL102"]
    assert cases[0].find("failure").text.startswith("line 6, col 48, TNL101 ")
    error = suites["broken.py"].find("testcase/error")
    assert "cannot parse" in error.get("message")


def test_junit_clean_run_is_one_passing_case(project):
    (project / "clean.py").write_text("import torch\nx = torch.ones(3)\n")
    root = ET.fromstring(junit.render(lint("clean.py"), Options()))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "0")
    [case] = root.iter("testcase")
    assert case.find("failure") is None and case.find("error") is None
