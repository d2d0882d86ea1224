"""The shape of a rule: one class that carries its own code, docs, examples and fix safety.

Examples are plain literals (`Example(...)` with string/tuple arguments) so that
`torchnumlint.runtime_check` can read them with `ast` on a machine without libcst, and run the
very text that the tests pin as the fixer's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, Optional, Tuple, Type

from torchnumlint.findings import Safety
from torchnumlint.rules.candidate_tree import CandidateTree, may_call

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst

    from torchnumlint.context import FileContext, FixBuilder
    from torchnumlint.index import ProjectIndex


@dataclass(frozen=True)
class Example:
    """A snippet the rule must flag: `lines` are the 1-based lines of its findings, `fixed` the
    exact text after `--fix --unsafe-fixes` (None where no fix is offered), `safety` the safety of
    that fix, "safe" or "unsafe" (None: the rule's own `safety`)."""

    bad: str
    lines: Tuple[int, ...]
    fixed: Optional[str] = None
    safety: Optional[str] = None

    def fix_safety(self, rule: Type["Rule"]) -> Safety:
        return Safety(self.safety) if self.safety is not None else rule.safety


_REGISTRY: Dict[str, Type["Rule"]] = {}


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    rationale: ClassVar[str]
    # The README rule table's cells (`tools/generate_docs.py` writes it): what the rule finds, in
    # a phrase with its measured threshold, and what its fix is, prefixed by its safety.
    finds: ClassVar[str]
    fix_summary: ClassVar[str]
    safety: ClassVar[Safety]
    default: ClassVar[bool] = True
    # A rule about the linter's own comments (TNL900 unused-noqa), not a numerical hazard: it has
    # no runtime reproduction, and `verify` has nothing to prove for it.
    meta: ClassVar[bool] = False
    # Whether the rule reads the project index (cross-file facts); the engine builds it only then.
    needs_index: ClassVar[bool] = False
    # Pre-filter: the rule cannot fire unless the source contains one of these strings (and, when
    # set, matches `pattern`, a regular expression for what substrings cannot say).
    needles: ClassVar[Tuple[str, ...]]
    pattern: ClassVar[Optional[str]] = None
    # Kinds ("softmax", "sigmoid", ...) that a project helper, method or module may produce for
    # this rule (`rules/producers.py`): the pre-filter also keeps a text that names such a helper
    # of the project, which the index knows (a rule that sets this sets `needs_index`).
    produced: ClassVar[FrozenSet[str]] = frozenset()
    # Candidate test on CPython's tree (`candidates.py`), after the text test: where set, the rule
    # can report in a group of statements only if the tree of its code holds a node of one of these
    # `ast` types (`Div`: the operator of `x / d` and `x /= d`) or its code one of `ast_words` as a
    # word (`div`: `torch.div(x, d)`, `x.div(d)`, an import of it under another name).
    ast_kinds: ClassVar[FrozenSet[str]] = frozenset()
    ast_words: ClassVar[FrozenSet[str]] = frozenset()
    # Candidate test for a rule that reports only at a call of one of these ops, in the forms
    # `calls.match_call` takes (`log(x)`, `torch.log(x)`, `x.log()`, an alias): the default
    # `tree_test` keeps a group only if its tree may hold one (`candidate_tree.may_call`: not
    # `log.info(...)`, `self.log(...)`, `math.log(x)`).
    ast_calls: ClassVar[Tuple[str, ...]] = ()
    examples: ClassVar[Tuple[Example, ...]]
    good: ClassVar[Tuple[str, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code:
            if code in _REGISTRY:
                raise RuntimeError(f"duplicate rule code {code}")
            _REGISTRY[code] = cls

    @classmethod
    def could_fire(cls, text: str, index: "Optional[ProjectIndex]" = None) -> bool:
        """The pre-filter: False only when the rule cannot report anything in `text`."""
        if cls.produced and index is not None and index.summaries.mentions_producer(text, cls.produced):
            return True
        if not any(needle in text for needle in cls.needles):
            return False
        if cls.pattern is None:
            return True
        compiled = cls.__dict__.get("_compiled")
        if compiled is None:
            compiled = re.compile(cls.pattern)
            setattr(cls, "_compiled", compiled)
        return compiled.search(text) is not None

    @classmethod
    def tree_test(cls, tree: "CandidateTree", index: "Optional[ProjectIndex]" = None) -> bool:
        """The candidate test on CPython's tree of a group's code (`candidates._can_fire`), asked
        after `could_fire` and `ast_kinds`/`ast_words` passed: False only where the rule cannot
        report in that code, with the facts of `index` (a producer or caller in another file) and
        under `--strict`. A rule overrides it with a test on the nodes its matchers read
        (`rules/candidate_tree.py`); by default a group passes unless `ast_calls` names ops it
        cannot call."""
        return not cls.ast_calls or may_call(tree, cls.ast_calls)

    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx

    def report(self, node: "cst.CSTNode", fix: "Optional[FixBuilder]" = None, **fmt: object) -> None:
        """Record a finding at `node`; `fmt` fills the placeholders of `message`. A value inside
        `node` known from a caller (`rules/callers.py`) names that caller at the end."""
        from torchnumlint.rules.callers import evidence_notes  # libcst: this module is read without it

        message = (self.message.format(**fmt) if fmt else self.message) + evidence_notes(self.ctx, node)
        self.ctx.add_report(self.code, self.name, node, message, fix)

    def fix(self, safety: Optional[Safety] = None) -> "FixBuilder":
        """A fix builder; its safety is `safety` where this fix's differs from the rule's (a clamp
        at 1 of an integer count is exact where the rule's clamps are not). GUIDE rules build none."""
        return self.ctx.new_fix(safety or self.safety)


def registered() -> Dict[str, Type[Rule]]:
    """The rules defined so far, by code, sorted: every rule once `rules.registry` has imported
    the families (ask `registry.registry()`)."""
    return dict(sorted(_REGISTRY.items()))
