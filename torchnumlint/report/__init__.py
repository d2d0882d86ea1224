"""Output formats, one module each: `render(result, options, quiet=False, statistics=False) -> str`.

`text` (the default) is ruff's full output: each finding with its source lines and its fix;
`concise` one line per finding. The machine formats (`json`, `sarif`, `github`, `gitlab`,
`junit`) carry the files that could not be linted as well as the findings; `quiet` and
`statistics` concern only the human formats.
"""

from torchnumlint.report import concise, github, gitlab, json_output, junit, sarif, text

FORMATS = {
    "text": text.render,
    "concise": concise.render,
    "json": json_output.render,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
    "junit": junit.render,
}
