"""JUnit XML, for CI systems that show test reports (Jenkins, GitLab `reports: junit:`, Azure).

One test suite per file with findings; each finding is a failed test case named by its rule
(`torchnumlint.TNL101`, class name the file), the failure saying where and what; a file that could
not be linted is a test case in error. A run with neither is one passing test case, so that a
clean run still shows up as a report (as ruff does). A character XML 1.0 cannot hold (a control
character or an undecodable byte in a file name) is replaced (`carry.py`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Dict, List

from torchnumlint.findings import Finding
from torchnumlint.report import carry
from torchnumlint.report.problems import Problem, problems
from torchnumlint.results import Options, RunResult


def _suite(parent: ET.Element, name: str, cases: int, failures: int, errors: int) -> ET.Element:
    return ET.SubElement(parent, "testsuite", name=name, tests=str(cases), failures=str(failures), errors=str(errors))


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    found = problems(result)
    root = ET.Element(
        "testsuites",
        name="torchnumlint",
        tests=str(max(1, len(result.findings) + len(found))),
        failures=str(len(result.findings)),
        errors=str(len(found)),
    )
    failing: Dict[str, List[Finding]] = {}
    broken: Dict[str, List[Problem]] = {}
    for f in result.findings:
        failing.setdefault(f.path, []).append(f)
    for p in found:
        broken.setdefault(p.path, []).append(p)
    for path in dict.fromkeys([*failing, *broken]):
        findings, errors = failing.get(path, []), broken.get(path, [])
        suite = _suite(root, path, len(findings) + len(errors), len(findings), len(errors))
        for f in findings:
            case = ET.SubElement(suite, "testcase", name=f"torchnumlint.{f.code}", classname=path, file=path, line=str(f.line))
            failure = ET.SubElement(case, "failure", message=f.message, type=f.code)
            cell = f"cell {f.cell}, " if f.cell is not None else ""
            failure.text = f"{cell}line {f.line}, col {f.col}, {f.code} {f.message}"
        for p in errors:
            case = ET.SubElement(suite, "testcase", name="torchnumlint.error", classname=path, file=path)
            if p.line is not None:
                case.set("line", str(p.line))
            ET.SubElement(case, "error", message=p.message).text = f"{p.path}: {p.message}"
    if not (failing or broken):
        suite = _suite(root, "torchnumlint", 1, 0, 0)
        ET.SubElement(suite, "testcase", name="No findings", classname="torchnumlint")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + carry.xml(ET.tostring(root, encoding="unicode"))
