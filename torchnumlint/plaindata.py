"""Typed values <-> JSON, for the on-disk cache: plain data in, plain data out, nothing ever run.

Why: a cache folder may be shared or checked out, so whoever can write it must not be able to run
code in the next `torchnumlint` (a pickle can). An entry is JSON, and it is read back *against the
type the reader expects*: every value is checked against its declared type (dataclass fields,
`record.Record` fields and named-tuple fields through their annotations, `List`, `Tuple`, `Dict`, `FrozenSet`, `Optional`,
`Union`, enums, and the plain `tuple` facts of `summaries.py`), and only the classes those types
name are ever built. Anything else (a wrong shape, a foreign tag, a missing field) raises
`Mismatch`, which the cache reads as a miss.

The encoding: a dataclass, a `Record` or a named tuple is `[tag, field, ...]` (the tag is its class name: a
`Union` of named tuples of one shape, `Unary` and `Item`, needs it); a tuple, list or set is a
list; a dict is a list of `[key, value]` pairs (its keys need not be strings); an enum is its
value; `summaries.Summaries` is its `files`. Readers of each type are built once per type.
"""

from __future__ import annotations

import enum
import functools
import json
import typing
from typing import Any, Callable, Dict, List, Tuple, cast

from torchnumlint.record import Record

Reader = Callable[[Any], Any]

_PLAIN = (str, int, float, bool, type(None))


class Mismatch(ValueError):
    """The data does not have the shape of the expected type."""


def dumps(value: object) -> bytes:
    return json.dumps(_encode(value), separators=(",", ":"), allow_nan=True).encode("utf-8")


def loads(data: bytes, expected: object) -> Any:
    """The value of type `expected` that `data` encodes; `Mismatch` when it is not one."""
    try:
        tree = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Mismatch(f"not JSON: {exc}") from None
    try:
        return reader(expected)(tree)
    except RecursionError:
        raise Mismatch("nested too deeply") from None


def _encode(value: object) -> object:
    if isinstance(value, enum.Enum):  # first: a `str` enum (`Safety`) is a str too
        return value.value
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, Record) or _is_dataclass(type(value)):
        return [type(value).__name__] + [_encode(getattr(value, name)) for name in record_fields(type(value))]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [type(value).__name__] + [_encode(item) for item in value]
    if isinstance(value, (tuple, list, set, frozenset)):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return [[_encode(key), _encode(item)] for key, item in value.items()]
    custom = _custom_codecs().get(type(value))
    if custom is not None:
        return _encode(custom[0](value))
    raise TypeError(f"the cache cannot store a {type(value).__name__}")


@functools.lru_cache(maxsize=None)
def _custom_codecs() -> Dict[type, Tuple[Callable[[Any], Any], Callable[[Any], Any], object]]:
    """Classes that are neither dataclasses nor named tuples: (to plain, from plain, plain type)."""
    from torchnumlint.summaries import FileSummary, Summaries

    return {Summaries: (lambda s: s.files, Summaries, Dict[str, typing.Optional[FileSummary]])}


@functools.lru_cache(maxsize=None)
def reader(expected: object) -> Reader:
    """The function that checks and builds a value of type `expected` from its JSON tree (built
    eagerly, field readers included: the types stored hold no cycles)."""
    origin = typing.get_origin(expected)
    args = typing.get_args(expected)
    leaf = _LEAVES.get(expected)
    if leaf is not None:
        return leaf
    if expected is tuple:
        return _plain_tuple
    if origin is typing.Union:
        others = [arg for arg in args if arg is not type(None)]
        if len(others) == 1:  # Optional[X]
            return _optional(reader(others[0]))
        return _union([reader(arg) for arg in args], args)
    if origin in (list, tuple, frozenset, set):
        return _sequence(origin, args)
    if origin is dict:
        return _mapping(reader(args[0]), reader(args[1]))
    if isinstance(expected, type):
        if issubclass(expected, enum.Enum):
            return functools.partial(_enum, expected)
        if is_record(expected):
            hints = typing.get_type_hints(expected)
            return _record(expected, [reader(hints[name]) for name in record_fields(expected)])
        custom = _custom_codecs().get(expected)
        if custom is not None:
            plain = reader(custom[2])
            return lambda tree: custom[1](plain(tree))
    raise TypeError(f"the cache cannot read a {expected!r}")


def _leaf(*kinds: type) -> Reader:
    """A reader of a JSON scalar of one of `kinds`; `kinds` is kept on it for the fast paths of
    sequences and records, which check their scalars inline."""

    def read(tree: Any) -> Any:
        if type(tree) not in kinds:
            raise Mismatch(f"expected {kinds[0].__name__}")
        return tree

    read.kinds = kinds  # type: ignore[attr-defined]  # a reader carries its scalar kinds (read back with getattr)
    return read


_LEAVES: Dict[object, Reader] = {
    str: _leaf(str),
    bool: _leaf(bool),
    int: _leaf(int),
    float: _leaf(float, int),
    type(None): _leaf(type(None)),
}


def _optional(inner: Reader) -> Reader:
    kinds = getattr(inner, "kinds", None)
    if kinds is not None:
        return _leaf(*kinds, type(None))

    def read(tree: Any) -> Any:
        return None if tree is None else inner(tree)

    return read


def _plain_tuple(tree: Any) -> tuple:
    """An untyped fact (`summaries.py`): strings, numbers, None and tuples of them."""
    if type(tree) is not list:
        raise Mismatch("expected a list")
    return tuple(_plain_tuple(item) if type(item) is list else _plain_item(item) for item in tree)


def _plain_item(item: Any) -> Any:
    if not isinstance(item, _PLAIN):
        raise Mismatch("expected a plain value")
    return item


def _union(readers: List[Reader], args: Tuple[object, ...]) -> Reader:
    tagged = {cast(type, arg).__name__: read for arg, read in zip(args, readers) if is_record(arg)}

    def read(tree: Any) -> Any:
        if tagged and type(tree) is list and tree and type(tree[0]) is str and tree[0] in tagged:
            return tagged[tree[0]](tree)
        for one in readers:
            try:
                return one(tree)
            except Mismatch:
                continue
        raise Mismatch("no alternative of the union fits")

    return read


def is_record(kind: object) -> bool:
    """Whether `kind` is stored as `[tag, field, ...]`: a `Record`, a dataclass or a named tuple."""
    return isinstance(kind, type) and (
        issubclass(kind, Record) or _is_dataclass(kind) or (issubclass(kind, tuple) and hasattr(kind, "_fields"))
    )


def _is_dataclass(kind: type) -> bool:
    """`dataclasses.is_dataclass`, without importing `dataclasses` (and `inspect`): a run whose
    classes are all `Record`s or named tuples never loads them."""
    return hasattr(kind, "__dataclass_fields__")


def record_fields(kind: type) -> List[str]:
    """The fields a record of class `kind` is stored by, in its constructor's order."""
    if _is_dataclass(kind):
        import dataclasses  # loaded already: `kind` was made by it

        return [f.name for f in dataclasses.fields(kind) if f.init]
    return list(cast(Any, kind)._fields)


def _sequence(origin: type, args: Tuple[object, ...]) -> Reader:
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        items = [reader(arg) for arg in args]
        kinds_of = [getattr(read, "kinds", None) for read in items]
        if None not in kinds_of:  # (`Tuple[int, str]`: most tuples stored)
            scalars = cast(List[Tuple[type, ...]], kinds_of)

            def plain(tree: Any) -> tuple:
                if type(tree) is not list or len(tree) != len(scalars):
                    raise Mismatch(f"expected a list of {len(scalars)}")
                for kinds, item in zip(scalars, tree):
                    if type(item) not in kinds:
                        raise Mismatch(f"expected {kinds[0].__name__}")
                return tuple(tree)

            return plain

        def fixed(tree: Any) -> tuple:
            if type(tree) is not list or len(tree) != len(items):
                raise Mismatch(f"expected a list of {len(items)}")
            return tuple(read(item) for read, item in zip(items, tree))

        return fixed
    item = reader(args[0])
    builds: Dict[type, type] = {list: list, tuple: tuple, frozenset: frozenset, set: set}
    build = builds[origin]
    kinds = getattr(item, "kinds", None)

    def many(tree: Any) -> Any:
        if type(tree) is not list:
            raise Mismatch("expected a list")
        if kinds is not None:
            if any(type(one) not in kinds for one in tree):
                raise Mismatch(f"expected a list of {kinds[0].__name__}")
            return build(tree)
        return build([item(one) for one in tree])

    return many


def _mapping(key: Reader, value: Reader) -> Reader:
    keys, values = getattr(key, "kinds", None), getattr(value, "kinds", None)
    if keys is not None and values is not None:  # (`Dict[str, int]`: the scalars checked inline)

        def plain(tree: Any) -> dict:
            if type(tree) is not list:
                raise Mismatch("expected a list of pairs")
            for pair in tree:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in keys or type(pair[1]) not in values:
                    raise Mismatch("expected a [key, value] pair of scalars")
            return dict(tree)

        return plain

    def read(tree: Any) -> dict:
        if type(tree) is not list:
            raise Mismatch("expected a list of pairs")
        result = {}
        for pair in tree:
            if type(pair) is not list or len(pair) != 2:
                raise Mismatch("expected a [key, value] pair")
            result[key(pair[0])] = value(pair[1])
        return result

    return read


def _enum(kind: type, tree: Any) -> Any:
    try:
        return kind(tree)
    except (ValueError, TypeError):
        raise Mismatch(f"not a {kind.__name__}") from None


def _record(kind: type, fields: List[Reader]) -> Reader:
    """A reader of `[tag, field, ...]`, which builds `kind` from its fields in order: a record's
    constructor takes them positionally in that order (`record_fields`)."""
    tag = kind.__name__
    size = len(fields) + 1
    steps = [(getattr(read, "kinds", None), read) for read in fields]

    def read(tree: Any) -> Any:
        if type(tree) is not list or len(tree) != size or tree[0] != tag:
            raise Mismatch(f"expected a {tag}")
        values = []
        for (kinds, read_one), item in zip(steps, tree[1:]):
            if kinds is None:
                values.append(read_one(item))
            elif type(item) in kinds:
                values.append(item)
            else:
                raise Mismatch(f"a field of {tag}: expected {kinds[0].__name__}")
        return kind(*values)

    return read
