"""The one-expression pre-test of exclude and .gitignore patterns answers as pathspec does, for
every path, negations and folder patterns included (`ignore_patterns.py`)."""

import itertools
import re

import pathspec
import pytest

from torchnumlint import ignore_patterns
from torchnumlint.discovery import DEFAULT_EXCLUDE

SPECS = [
    DEFAULT_EXCLUDE,
    DEFAULT_EXCLUDE + ["generated/", "*_pb2.py", "/top.py"],
    ["*.py", "!keep.py", "!/pkg/also.py"],
    ["build/", "!build/keep/", "docs/**/conf.py", "a?c.py", "[ab]x.py", "# a comment", "", "  "],
    ["\\!literal.py", "\\#hash.py", "(?P<x>).py", "dir/*", "**/deep/*.pyi"],
    [],
]
PATHS = [
    "a.py",
    "keep.py",
    "pkg/also.py",
    "pkg/keep.py",
    "build",
    "build/",
    "build/x.py",
    "build/keep/x.py",
    "src/build/x.py",
    "venv/lib/x.py",
    "x.egg-info/",
    "docs/a/b/conf.py",
    "docs/conf.py",
    "abc.py",
    "ax.py",
    "cx.py",
    "!literal.py",
    "#hash.py",
    "(?P<x>).py",
    "dir/a.py",
    "dir/sub/a.py",
    "q/deep/a.pyi",
    "top.py",
    "/top.py",
    "./top.py",
    "sub/top.py",
    "generated/",
    "m_pb2.py",
    "__pycache__/",
    "./a.py",
    "/abs/a.py",
    "dist",
    "distinct.py",
]


@pytest.mark.parametrize("lines", SPECS)
def test_every_path_is_matched_as_pathspec_matches_it(lines):
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    ours = ignore_patterns.Patterns(spec)
    assert ours._any is not None  # the pre-test is built for each of these specs
    for path, suffix in itertools.product(PATHS, ["", "/"]):
        assert ours.match_file(path + suffix) == spec.match_file(path + suffix), (lines, path + suffix)


def test_the_union_matches_wherever_an_including_pattern_matches():
    spec = pathspec.GitIgnoreSpec.from_lines(["*.py", "!keep.py"])
    union = ignore_patterns.union(spec)
    assert union is not None and union.search("a.py") and union.search("pkg/b.py") and not union.search("a.txt")


def test_a_spec_it_cannot_express_is_asked_whole():
    spec = pathspec.GitIgnoreSpec.from_lines(["*.py", "build/"])
    spec.patterns[1].regex = re.compile(spec.patterns[1].regex.pattern, re.IGNORECASE)
    ours = ignore_patterns.Patterns(spec)
    assert ours._any is None  # two sets of flags: no exact union
    assert ours.match_file("a.py") and ours.match_file("BUILD/") and not ours.match_file("a.txt")
