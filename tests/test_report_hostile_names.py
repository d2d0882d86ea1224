"""Every report format writes what it can carry for hostile file names, through the installed
command: a name that is not UTF-8 and names with control characters (issue 21, item 6). SARIF is
validated against the official schema, GitLab's report read as strict UTF-8 JSON, JUnit's by an
XML parser."""

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.test_cli import EXE
from tests.test_report_formats import SCHEMA
from torchnumlint.report import FORMATS

FLAGGED = b"import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"
NAMES = [b"latin\xe9.py", b"ctl\x01name.py", b"esc\x1b[31m.py", b"tab\tname.py"]


@pytest.fixture
def hostile(tmp_path):
    folder = os.fsencode(tmp_path)
    for name in NAMES:
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(FLAGGED)
    with open(os.path.join(folder, b"broken\x02\xff.py"), "wb") as handle:  # an error, not a finding
        handle.write(b"import torch\nx = (\n")
    return tmp_path


HUMAN = ("text", "concise")  # for a terminal: a name's own bytes, as the file system has them


def report(folder, name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([str(EXE), "--no-cache", "--output-format", name, "."], cwd=folder, capture_output=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in done.stderr
    return done.stdout.decode("utf-8", "surrogateescape" if name in HUMAN else "strict")


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_reports_every_file_whatever_its_name(hostile, name):
    out = report(hostile, name)
    assert out.count("TNL103") >= len(NAMES)


def test_sarif_validates_against_the_schema_and_its_uris_keep_the_bytes(hostile):
    log = json.loads(report(hostile, "sarif"))
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"])
    assert "latin%E9.py" in uris and "ctl%01name.py" in uris
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken%02%FF.py"
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (dev extra): SARIF not validated")
    if not SCHEMA.is_file():
        pytest.skip(f"SARIF not validated: the official schema is absent ({SCHEMA})")
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(log)


def test_gitlab_is_strict_json_with_distinct_fingerprints(hostile):
    issues = json.loads(report(hostile, "gitlab"))
    assert "latin\ufffd.py" in {issue["location"]["path"] for issue in issues}
    assert len({issue["fingerprint"] for issue in issues}) == len(issues) == len(NAMES) + 1


def test_junit_parses_as_xml(hostile):
    root = ET.fromstring(report(hostile, "junit").encode("utf-8"))
    suites = {suite.get("name") for suite in root.iter("testsuite")}
    assert {"ctl\ufffdname.py", "latin\ufffd.py", "tab\tname.py", "broken\ufffd\ufffd.py"} <= suites
