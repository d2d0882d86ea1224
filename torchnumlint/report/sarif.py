"""SARIF 2.1.0, the format of GitHub code scanning (`github/codeql-action/upload-sarif`) and of
other SARIF viewers.

One run. Its driver lists every rule: id, name, the rationale as description and help, the
default level and whether the rule is on by default. The rule metadata is read from the rules'
sources with `ast` (`torchnumlint.catalogue`, which never imports a rule), so that this reporter,
like the others, runs without libcst; a code that has no rule class there (a finding the runner
itself makes) gets a descriptor with its id and name only. Each finding is a result at its region
with its fix as a SARIF fix. Each file that could not be linted (or only in part) is an error
notification of the invocation, which then did not succeed.

Texts replace what UTF-8 cannot carry, and URIs percent-encode a name's bytes (`carry.py`).

Every finding fails the run (exit 1), so every rule's level is "error". Columns count Unicode code
points (`columnKind`), as torchnumlint's do; end columns are exclusive in both. A relative path is
a URI relative to `%SRCROOT%`, the working folder of the run (which GitHub maps to the checkout).
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePath
from typing import Dict, List, Optional

from torchnumlint import __version__
from torchnumlint.findings import Finding, Safety
from torchnumlint.report.problems import Problem, problems
from torchnumlint.results import Options, RunResult
from torchnumlint import catalogue
from torchnumlint.report import carry

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_ROOT = "%SRCROOT%"
_FIX = {
    "SAFE": "safe: applied by --fix; the same values wherever the original is finite",
    "UNSAFE": "unsafe: applied by --fix --unsafe-fixes; it can change results",
    "GUIDE": "none: the message says what to do",
}


def _artifact(path: str) -> dict:
    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": carry.uri_path(PurePath(path).as_posix()), "uriBaseId": _ROOT}


def _region(line: int, col: int, end_line: int, end_col: int) -> dict:
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}


def _rule(info: catalogue.RuleInfo) -> dict:
    help_text = f"{info.rationale}\n\nFix: {_FIX[info.safety]}.\nFull documentation: `torchnumlint rule {info.code}`."
    return {
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.name.replace("-", " ")},
        "fullDescription": {"text": info.rationale},
        "help": {"text": help_text, "markdown": help_text},
        "defaultConfiguration": {"level": "error", "enabled": info.default},
        "properties": {"fix": info.safety.lower()},
    }


def _rules(findings: List[Finding]) -> List[dict]:
    known = catalogue.load()
    rules = [_rule(info) for info in known.values()]
    extra = {f.code: f.name for f in findings if f.code not in known}
    rules += [{"id": code, "name": name} for code, name in sorted(extra.items())]
    return rules


def _fix(finding: Finding) -> Optional[dict]:
    fix = finding.fix
    if fix is None or not fix.edits:
        return None
    how = "--fix" if fix.safety is Safety.SAFE else "--fix --unsafe-fixes"
    replacements = []
    for edit in fix.edits:
        replacement: dict = {"deletedRegion": _region(*edit.location, *edit.end_location)}
        if edit.content:
            replacement["insertedContent"] = {"text": edit.content}
        replacements.append(replacement)
    return {
        "description": {"text": f"{fix.safety.value} fix (applied by {how})"},
        "artifactChanges": [{"artifactLocation": _artifact(finding.path), "replacements": replacements}],
    }


def _in_cell(finding: Finding) -> str:
    return f"cell {finding.cell}: " if finding.cell is not None else ""


def _result(finding: Finding, index: Dict[str, int]) -> dict:
    result = {
        "ruleId": finding.code,
        "ruleIndex": index[finding.code],
        "level": "error",
        "message": {"text": _in_cell(finding) + finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(finding.path),
                    "region": _region(finding.line, finding.col, finding.end_line, finding.end_col),
                }
            }
        ],
    }
    if finding.cell is not None:  # a notebook: the region's lines count within this cell
        result["properties"] = {"cell": finding.cell}
    fix = _fix(finding)
    if fix is not None:
        result["fixes"] = [fix]
    return result


def _notification(problem: Problem) -> dict:
    notification: dict = {"level": "error", "message": {"text": f"{problem.path}: {problem.message}"}}
    if problem.path:
        location: dict = {"artifactLocation": _artifact(problem.path)}
        if problem.line is not None:
            location["region"] = {"startLine": problem.line, "startColumn": problem.col or 1}
        notification["locations"] = [{"physicalLocation": location}]
    return notification


def render(result: RunResult, options: Options, quiet: bool = False, statistics: bool = False) -> str:
    rules = _rules(result.findings)
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    run = {
        "tool": {
            "driver": {
                "name": "torchnumlint",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": rules,
            }
        },
        "invocations": [
            {
                "executionSuccessful": not result.errors,
                "toolExecutionNotifications": [_notification(p) for p in problems(result)],
            }
        ],
        "originalUriBaseIds": {_ROOT: {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, index) for f in result.findings],
    }
    return json.dumps(carry.plain({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}), indent=2)
