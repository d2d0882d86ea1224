"""The last lint's questions about producers narrowed to the words of the statements whose
findings are carried over.

Why: a lint asks the index which words of the buffer name a producer (the rules' pre-filter,
`Summaries.mentions_producer`), and the answer is recorded for every word of the text at once
(`fact_reads.Recorder.reads`). A helper added, renamed or removed changes that answer (its name
is a producer, or no longer one), so the replay that must hold for the last findings to be
carried over failed after any such edit, and the whole buffer was linted (0.8 s on a 60 KB
diffusers script). But a statement's findings can use a producer only if its group's code names
one: the pre-filter of the whole run is asked group by group (`candidates._can_fire` gives
`could_fire` the text of the group and of the module-level statements it reads), and a group
whose text names none is masked. The statements carried over are linked to no statement linted
again (`relint_scope`), so their groups hold only statements kept as they were, and the words of
those statements are all that their findings can have read of that answer. So the recorded
question is narrowed to them, and its answer worked out again from the index it was answered by.

The questions of the buffer's own frame (`with_file`: the buffer's summary over the project's)
are narrowed too, answered by the last index with the last text's summary; a word whose CRC
collides with a kept word stays in, which can only cost a whole lint.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Dict, Set

from torchnumlint.cache import canonical_digest
from torchnumlint.fact_reads import crc_hex
from torchnumlint.summaries import Summaries

Answers = Dict[tuple, str]  # a question asked of the facts -> its answer's digest


def narrowed(answers: Answers, kept: AbstractSet[str], frame: Callable[[str], Summaries]) -> Answers:
    """`answers` with each producer question narrowed to the words of `kept` (the words of the
    statements carried over) and answered again by `frame(name)`, the summaries that frame was
    (the last lint's)."""
    out: Answers = {}
    crcs_of_kept: Dict[str, Set[str]] = {}
    for word in kept:
        crcs_of_kept.setdefault(crc_hex(word), set()).add(word)
    for question, answer in answers.items():
        if question[0] != "producers":
            out[question] = answer
            continue
        _, name, kinds, crcs = question
        asked = {crcs[at : at + 8] for at in range(0, len(crcs), 8)}
        words = {word for crc in asked & crcs_of_kept.keys() for word in crcs_of_kept[crc]}
        fewer = "".join(sorted({crc_hex(word) for word in words}))  # as `Recorder.reads` writes it
        if fewer == crcs:
            out[question] = answer
            continue
        try:
            summaries = frame(name)
        except ValueError:  # a frame not known: the question stays whole (the replay may fail)
            out[question] = answer
            continue
        found = tuple(tuple(sorted(summaries.producers_among(words, frozenset(one)))) for one in kinds)
        out[("producers", name, kinds, fewer)] = canonical_digest(found)
    return out
