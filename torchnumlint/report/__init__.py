"""Output formats, one module each: `render(result, options, quiet=False, statistics=False) -> str`.

`text` (the default) is ruff's full output: each finding with its source lines and its fix;
`concise` one line per finding. The machine formats (`json`, `sarif`, `github`, `gitlab`,
`junit`) carry the files that could not be linted as well as the findings; `quiet` and
`statistics` concern only the human formats.

`FORMATS` imports a reporter when its format is asked for: a run loads only its own (junit's
`xml.etree`, sarif's catalogue are no cost of a start-up that prints text).
"""

from __future__ import annotations

import importlib
from typing import Callable, Iterator, Mapping

_MODULES = {
    "text": "text",
    "concise": "concise",
    "json": "json_output",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
}


class _Reporters(Mapping[str, Callable[..., str]]):
    """format name -> its module's `render`, imported on first use."""

    def __getitem__(self, name: str) -> Callable[..., str]:
        module = importlib.import_module(f"torchnumlint.report.{_MODULES[name]}")
        render: Callable[..., str] = module.render
        return render

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


FORMATS: Mapping[str, Callable[..., str]] = _Reporters()
