"""One vocabulary of tensor methods by what they do to values: plain data, no libcst.

Every question "does this step keep the value?" is answered from these sets, so that two rules
never disagree on `view_as` or `movedim`. A matcher composes what its question needs (a norm stays
a norm under a float cast; a probability does not survive `.long()`; a count stays a count under
`.sum()`) from the pieces below and says why in its own module; it never writes its own list.
`tests/test_vocabulary.py` checks that every composed set keeps the shape-only steps.
"""

from __future__ import annotations

# Steps that move entries around without changing one (and keep every zero where it was, up to
# position): a norm of the result is a norm of the input.
SHAPE_ONLY = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "t",
        "contiguous",
        "flatten",
        "unflatten",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
    }
)
# Attributes that are such steps (`x.T`).
SHAPE_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})
# Casts between floating dtypes: the same values, up to rounding.
FLOAT_CASTS = frozenset({"float", "double", "half", "bfloat16", "to", "type_as"})
# Casts that can change a value's kind (a probability becomes 0 under `.long()`), and `type`.
OTHER_CASTS = frozenset({"bool", "byte", "long", "int", "type"})
# Moves between devices.
DEVICE_MOVES = frozenset({"cuda", "cpu"})
# Copies: the same values (`detach` also drops the gradient, which some questions care about).
COPIES = frozenset({"clone"})
DETACH = frozenset({"detach"})
# Steps that replace only NaN and +-Inf: every finite value is kept, so a probability's 0 and 1 stay
# (`F.binary_cross_entropy(torch.nan_to_num(torch.sigmoid(z)), y)` is still capped at 100).
FINITE_KEEPING = frozenset({"nan_to_num"})
# Steps that repeat entries (a sum of the result is a multiple of the input's).
REPEATS = frozenset({"repeat", "repeat_interleave"})
# Steps that keep a subset of the entries.
SELECTIONS = frozenset({"gather", "index_select", "narrow", "masked_select", "take_along_dim", "select"})
# Steps that read only a size: the result is the same for every value.
SIZE_METHODS = frozenset({"size", "dim", "numel", "nelement"})
SIZE_ATTRIBUTES = frozenset({"shape", "ndim", "device", "dtype", "is_cuda"})

# Methods of an `nn.Module` that return the module itself: `Net().to(device)` is still a Net (the
# index and the summaries both follow a constructor through them).
MODULE_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half", "double", "requires_grad_"})

# The values themselves, moved or copied: what every "same values" question starts from.
SAME_VALUES = SHAPE_ONLY | FLOAT_CASTS | DEVICE_MOVES | COPIES
