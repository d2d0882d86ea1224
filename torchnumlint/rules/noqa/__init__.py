"""TNL9xx, rules about torchnumlint's own comments rather than about numerics: `# noqa: TNL...`
codes that suppress nothing (TNL900, `unused_noqa`). They read the directives `directives.py`
parses and which of them silenced a finding in this run; they have no numerical hazard, so no
reproduction under `runtime_check/repros/` (their classes say `meta = True`). `rules/registry.py`
finds its rule modules.
"""
