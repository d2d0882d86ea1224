"""Output formats, one module each: `render(result, options) -> str`."""

from torchnumlint.report import json_output, text

FORMATS = {"text": text.render, "json": json_output.render}
