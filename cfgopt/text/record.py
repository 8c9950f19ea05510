"""`Record`: the package's immutable records, written and type-checked as `typing.NamedTuple` classes, built at
run time without `typing`.

    class Edit(Record):
        '''Replace text[start:end] with `text`.'''

        start: int
        end: int
        text: str = ""

A type checker reads `Record` as `typing.NamedTuple` (the `TYPE_CHECKING` branch below). At run time `class
Edit(Record)` builds what `typing.NamedTuple` builds, a `tuple` subclass with `__slots__ = ()` (no instance dict),
`_fields`, `_field_defaults`, `__match_args__`, `_make`, `_replace`, `_asdict`, an `Edit(start=1, end=2, text='')`
repr, tuple equality, hashing and ordering, pickling and copying, the class's docstring, methods and properties,
and the same `TypeError` for a missing, unknown or repeated argument (tests/text/test_record.py compares both).

Why not `typing.NamedTuple`: it imports `typing` (3 ms of a lint's start-up) and turns every field's annotation
into a `typing.ForwardRef`, one `compile` each under `from __future__ import annotations`, then builds the class
with `collections.namedtuple`, whose `__new__` is made by `eval`: 95 us a class against 14 us here (the package's
79 record bodies made with each base, best of 20), and a seed lint creates 41 records. The price is a call by
keyword, bound in Python: about 1 us against 0.45 (a seed lint makes some 450). The annotations are never
evaluated, so a field may name a type that only a type checker imports; `typing.get_type_hints` still reads them
where those names exist.
"""

from __future__ import annotations

import sys
from operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

__all__ = ["MutableRecord", "Record"]

try:  # the C descriptor `collections.namedtuple` gives its fields
    from _collections import _tuplegetter  # type: ignore[import-not-found]  # CPython's, not in typeshed
except ImportError:  # an interpreter without it: a property reads the same, a little slower

    def _tuplegetter(index: int, doc: str) -> Any:
        return property(itemgetter(index), doc=doc)


# What a record's body may not define: `typing.NamedTuple` refuses the same names (AttributeError).
_PROHIBITED = frozenset(
    {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults", "_make", "_replace", "_asdict"}
)
# `_replace` with a name that is no field: ValueError until Python 3.13, TypeError since (as `namedtuple`'s)
_REPLACE_ERROR = TypeError if sys.version_info >= (3, 13) else ValueError


class _RecordType(type):
    """The metaclass of `Record` alone: `class X(Record)` returns a plain `tuple` subclass (its metaclass is `type`),
    as `class X(typing.NamedTuple)` does, so a subclass of `X` is an ordinary class."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        if bases != (Record,):
            raise TypeError(f"{name}: a record derives from Record alone")
        return record_class(name, namespace)


def record_class(name: str, namespace: dict[str, Any]) -> type:
    """The `tuple` subclass that a class body deriving from `Record` describes: its annotated names are the fields,
    in order, and the values given to them their defaults."""
    fields = tuple(_annotations(namespace))
    defaults: dict[str, Any] = {}
    for field in fields:
        if field.startswith("_"):
            raise ValueError(f"Field names cannot start with an underscore: {field!r}")
        if field in namespace:
            defaults[field] = namespace[field]
        elif defaults:
            plural = "s" if len(defaults) > 1 else ""
            raise TypeError(
                f"Non-default namedtuple field {field} cannot follow default field{plural} {', '.join(defaults)}"
            )
    for key in namespace.keys() & _PROHIBITED:
        raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
    body: dict[str, Any] = {
        "__doc__": f"{name}({', '.join(fields)})",
        "__slots__": (),
        "_fields": fields,
        "_field_defaults": defaults,
        "__match_args__": fields,
        "__new__": _constructor(name, fields, defaults),
        "__getnewargs__": _getnewargs,
        "__repr__": _repr,
        "_make": _make,
        "_replace": _replace,
        "__replace__": _replace,  # `copy.replace` (Python 3.13), as `namedtuple` gives it
        "_asdict": _asdict,
    }
    body.update((key, value) for key, value in namespace.items() if key not in defaults)
    body.update((field, _tuplegetter(index, f"Alias for field number {index}")) for index, field in enumerate(fields))
    return type(name, (tuple,), body)


def _annotations(namespace: dict[str, Any]) -> dict[str, Any]:
    """The body's annotations, unevaluated: under `from __future__ import annotations` (every module of cfgopt) a
    dict of strings. Python 3.14 without that import keeps a function instead, read here as forward references."""
    if "__annotations__" in namespace:
        return namespace["__annotations__"]
    if sys.version_info < (3, 14):  # a body without fields
        return {}
    import annotationlib  # type: ignore[import-not-found]  # (not run by the tests on 3.10-3.13)

    annotate = annotationlib.get_annotate_from_class_namespace(namespace)
    return annotationlib.call_annotate_function(annotate, annotationlib.Format.FORWARDREF) if annotate else {}


def _constructor(name: str, fields: tuple[str, ...], defaults: dict[str, Any]) -> Callable[..., Any]:
    """The record's `__new__`: every field given by position takes the short way; any other call is bound as a
    function of the fields' names would bind it, with the same errors."""
    size, new, bind = len(fields), tuple.__new__, _Signature(name, fields, defaults).bind

    def __new__(cls: type, /, *args: Any, **kwargs: Any) -> Any:  # `cls` by position: a field may be named so
        if kwargs or len(args) != size:
            args = bind(args, kwargs)
        return new(cls, args)

    __new__.__qualname__ = f"{name}.__new__"
    __new__.__doc__ = f"Create new instance of {name}({', '.join(fields)})"
    return __new__


class _Signature:
    """One record's `__new__(_cls, *fields)` as `namedtuple` writes it: binds a call to the fields, or raises the
    `TypeError` that Python raises for that function (its message, with the class's name)."""

    __slots__ = ("defaults", "fields", "fill", "getter", "name", "required")

    def __init__(self, name: str, fields: tuple[str, ...], defaults: dict[str, Any]) -> None:
        self.name, self.fields, self.defaults = name, fields, defaults
        self.required = len(fields) - len(defaults)  # the fields with a default are the last ones
        self.fill = tuple(defaults.values())
        # the values of a dict holding every field, in field order (`itemgetter` of one name gives no tuple)
        self.getter = itemgetter(*fields) if len(fields) > 1 else lambda named: tuple(named[f] for f in fields)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The values of `Name(*args, **kwargs)` in field order. The short way (dict operations in C) holds when
        no name is given twice, every name is a field and every field has a value; any doubt takes the long way."""
        if not kwargs and self.required <= len(args) < len(self.fields):  # `Fix(description, kind, edits)`: defaults
            return args + self.fill[len(args) - self.required :]
        named = kwargs
        if args:
            named = dict(zip(self.fields, args, strict=False))
            named.update(kwargs)
            if len(args) > len(self.fields) or len(named) != len(args) + len(kwargs):
                return self.bind_slowly(args, kwargs)
        if self.defaults:
            named = {**self.defaults, **named}
        if len(named) == len(self.fields):  # a field missing and an unknown name can make up the count: KeyError
            try:
                return self.getter(named)
            except KeyError:
                pass
        return self.bind_slowly(args, kwargs)

    def bind_slowly(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """`bind` one name at a time, in the order Python checks a call: each keyword (unknown, or given by
        position too), then too many positional arguments, then the fields without a value."""
        name, fields, given = self.name, self.fields, len(args)
        for key in kwargs:
            if key not in fields:
                raise TypeError(f"{name}.__new__() got an unexpected keyword argument '{key}'")
            if key in fields[:given]:
                raise TypeError(f"{name}.__new__() got multiple values for argument '{key}'")
        if given > len(fields):
            first = self.required + 1  # counting `_cls`, as Python's message does
            takes = f"from {first} to {len(fields) + 1}" if self.defaults else str(first)
            plural = "" if takes == "1" else "s"
            raise TypeError(f"{name}.__new__() takes {takes} positional argument{plural} but {given + 1} were given")
        named = {**self.defaults, **dict(zip(fields, args, strict=False)), **kwargs}
        missing = [f"'{field}'" for field in fields if field not in named]
        if missing:
            names = " and ".join(missing) if len(missing) < 3 else f"{', '.join(missing[:-1])}, and {missing[-1]}"
            plural = "s" if len(missing) > 1 else ""
            raise TypeError(f"{name}.__new__() missing {len(missing)} required positional argument{plural}: {names}")
        return tuple(named[field] for field in fields)


# The methods every record shares (they read `_fields` from the class, so one function serves them all).


@classmethod  # type: ignore[misc]
def _make(cls: type, iterable: Iterable[Any]) -> Any:
    """Make a new record from a sequence or iterable."""
    result: tuple[Any, ...] = tuple.__new__(cls, iterable)
    if len(result) != len(cls._fields):  # type: ignore[attr-defined]
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")  # type: ignore[attr-defined]
    return result


def _replace(self: Any, /, **changes: Any) -> Any:
    """Return a new record replacing the named fields with new values."""
    result = self._make(map(changes.pop, self._fields, self))
    if changes:
        raise _REPLACE_ERROR(f"Got unexpected field names: {list(changes)!r}")
    return result


def _asdict(self: Any) -> dict[str, Any]:
    """Return a new dict which maps field names to their values."""
    return dict(zip(self._fields, self, strict=True))


def _repr(self: Any) -> str:
    """Return a nicely formatted representation string."""
    shown = ", ".join(f"{field}={value!r}" for field, value in zip(self._fields, self, strict=True))
    return f"{type(self).__name__}({shown})"


def _getnewargs(self: Any) -> tuple[Any, ...]:
    """Return self as a plain tuple: what pickle and copy pass to `__new__`."""
    return tuple(self)


class MutableRecord:
    """The equality and repr `@dataclass` gives a mutable record, over its `FIELDS` (its `__init__` parameters in
    order), for a class written by hand: `dataclasses` imports `inspect` (with `ast`, `dis` and `tokenize`), about
    4 ms of a lint that estimates memory. Unhashable, as a dataclass with `eq` is."""

    FIELDS: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self.FIELDS)})"

    def __eq__(self, other: object) -> bool:
        return self._values() == other._values() if type(other) is type(self) else NotImplemented  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]


if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    _DOC = "The base of a record: `class Name(Record):` and annotated fields, as with `typing.NamedTuple`."
    Record = type.__new__(_RecordType, "Record", (), {"__module__": __name__, "__doc__": _DOC})
