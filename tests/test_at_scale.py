"""`--fix --unsafe-fixes` on a copy of real code (`tools/fix_at_scale.py`): every rewritten file
parses, a second run changes nothing, files without a fixable finding stay byte-identical, no
internal error. The tree: installed torch files, each with a rule example (`tests/real_code.py`)."""

from tests.real_code import real_texts
from tools.fix_at_scale import check

SAMPLE = 40


def test_fix_at_scale_on_real_files(tmp_path):
    tree = tmp_path / "tree"
    for number, (path, text) in enumerate(real_texts(SAMPLE)):
        target = tree / f"pkg{number % 8}" / f"m{number}_{path.rsplit('/', 1)[-1]}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (tree / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    report = check(str(tree), jobs=2)
    assert report.problems == [], report.line()
    assert report.files >= SAMPLE * 0.9 and report.rewritten >= SAMPLE // 4, report.line()
