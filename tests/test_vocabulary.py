"""One vocabulary per fact: every matcher's set of value-keeping steps is composed from
`rules/vocabulary.py`, so they agree on the shape-only steps (`view_as`, `movedim`, ...) and on
what each deliberately adds or leaves out."""

import pytest

from torchnumlint.rules import elementary, evidence, mask_origin, masks, shapes, uses, value_steps, vocabulary

COMPOSED = {
    "evidence.SHAPE_METHODS": evidence.SHAPE_METHODS,
    "masks._RESHAPES": masks._RESHAPES,
    "value_steps._STEP_METHODS": value_steps._STEP_METHODS,
    "elementary._KEEPING": elementary._KEEPING,
    "uses._SAME_VALUES": uses._SAME_VALUES,
    "shapes.SHAPE_STEPS": shapes.SHAPE_STEPS,
    "mask_origin._KEEPS_RECEIVER": mask_origin._KEEPS_RECEIVER,
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_every_value_keeping_set_keeps_every_shape_only_step(name):
    assert vocabulary.SHAPE_ONLY <= COMPOSED[name], sorted(vocabulary.SHAPE_ONLY - COMPOSED[name])


def test_only_the_mask_question_takes_casts_that_change_values():
    # `.long()` of a probability is 0: a value question must not see through it; a mask stays a mask
    for name, found in COMPOSED.items():
        if name != "mask_origin._KEEPS_RECEIVER":
            assert not found & (vocabulary.OTHER_CASTS - {"type"}), name
    assert vocabulary.OTHER_CASTS <= mask_origin._KEEPS_RECEIVER


def test_shape_attributes_are_one_set():
    assert value_steps._STEP_ATTRS is vocabulary.SHAPE_ATTRIBUTES is shapes.SHAPE_ATTRIBUTES


def test_the_index_and_the_summaries_follow_one_set_of_module_methods():
    # `Net().double()` is still a Net for both: the index (constructors) and the summaries (returns)
    from torchnumlint import index, summaries

    assert index.MODULE_METHODS is summaries.vocabulary.MODULE_METHODS is vocabulary.MODULE_METHODS
    assert {"to", "eval", "half", "double"} <= vocabulary.MODULE_METHODS


def test_every_shape_only_step_numpy_lacks_marks_a_torch_tensor():
    # `x.view_as(y)`, `x.movedim(1, -1)`: only a tensor has them, so a clamp_min fix fits the value
    assert vocabulary.SHAPE_ONLY - evidence._NUMPY_SHAPE_METHODS <= evidence._TENSOR_ONLY_METHODS
    assert not {"reshape", "transpose", "flatten"} & evidence._TENSOR_ONLY_METHODS
