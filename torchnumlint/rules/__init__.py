"""The rules: `base.py` (the Rule class), the shared matchers (the modules here), one package per
family with one module per rule. Importing this package loads nothing else; `rules.registry`
imports every family.
"""
