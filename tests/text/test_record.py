"""`Record` (cfgopt/text/record.py) behaves as `typing.NamedTuple`: the same class written with each base is
compared on what the package and its tests rely on (fields, defaults, calls and their errors, repr, tuple
equality and order, `_make`, `_replace`, `_asdict`, pickling, copying, methods, properties, class methods,
pattern matching, no instance dict); and every record of cfgopt/ has the fields and defaults its
class body writes."""

from __future__ import annotations

import ast
import copy
import importlib
import itertools
import pickle
import typing
from pathlib import Path
from typing import NamedTuple

import pytest
from repo_paths import ROOT

from cfgopt.text.record import Record


def _edit_class(base: type) -> type:
    """One record's body, written once, made with `base` (`Record` or `NamedTuple`): both classes are named
    `Edit`, so their error messages can be compared as they are."""

    class Edit(base):  # type: ignore[misc, valid-type]
        """Replace text[start:end] with `text`."""

        start: int
        end: int
        text: str = ""
        note: Path | None = None

        @property
        def length(self) -> int:
            return self.end - self.start

        def moved(self, by: int) -> Edit:
            return self._replace(start=self.start + by, end=self.end + by)

        @classmethod
        def at(cls, offset: int) -> Edit:
            return cls(offset, offset)

        @staticmethod
        def kind() -> str:
            return "edit"

    return Edit


RecordEdit, TupleEdit = _edit_class(Record), _edit_class(NamedTuple)  # type: ignore[arg-type]


class Point(Record):  # module level, so that pickle finds it
    x: int
    y: int = 0


class NoDoc(Record):
    only: str


def _outcome(cls: type, args: tuple, kwargs: dict) -> tuple:
    """What a call gives: the values, or the exception's type and message."""
    try:
        return ("values", tuple(cls(*args, **kwargs)))
    except Exception as error:  # noqa: BLE001 - the outcome compared is whatever the call raises
        return (type(error), str(error))


def test_every_call_binds_or_fails_as_a_named_tuple() -> None:
    """Every positional count up to one too many, with every ordered choice of up to three keywords among the
    fields and an unknown name: the same values, or the same exception and message."""
    names = ["start", "end", "text", "note", "unknown"]
    calls = 0
    for given in range(6):
        args = tuple(range(10, 10 + given))
        for count in range(4):
            for keys in itertools.permutations(names, count):
                kwargs = {key: f"<{key}>" for key in keys}
                assert _outcome(RecordEdit, args, kwargs) == _outcome(TupleEdit, args, kwargs), (args, kwargs)
                calls += 1
    assert calls == 6 * (1 + 5 + 20 + 60)


def test_the_class_carries_what_a_named_tuple_carries() -> None:
    for attribute in ("_fields", "_field_defaults", "__match_args__", "__doc__", "__module__", "__slots__"):
        assert getattr(RecordEdit, attribute) == getattr(TupleEdit, attribute), attribute
    assert RecordEdit.__new__.__doc__ == TupleEdit.__new__.__doc__
    assert RecordEdit.__new__.__doc__ == "Create new instance of Edit(start, end, text, note)"
    assert [RecordEdit.__dict__[f].__doc__ for f in RecordEdit._fields] == [
        TupleEdit.__dict__[f].__doc__ for f in TupleEdit._fields
    ]
    assert RecordEdit.__qualname__ == "_edit_class.<locals>.Edit"
    assert RecordEdit.__mro__[1:] == TupleEdit.__mro__[1:] == (tuple, object)
    assert type(RecordEdit) is type  # a subclass of a record is a plain class, as of a NamedTuple
    assert NoDoc.__doc__ == "NoDoc(only)"


def test_an_instance_is_a_tuple_without_a_dict() -> None:
    edit, twin = RecordEdit(1, 4, "x"), TupleEdit(1, 4, "x")
    assert isinstance(edit, tuple) and not hasattr(edit, "__dict__")
    with pytest.raises(AttributeError):
        edit.start = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        edit.other = 2  # type: ignore[attr-defined]
    assert repr(edit) == repr(twin) == "Edit(start=1, end=4, text='x', note=None)"
    assert edit == twin == (1, 4, "x", None) and hash(edit) == hash(twin) == hash((1, 4, "x", None))
    assert RecordEdit(1, 2) < RecordEdit(1, 3) < RecordEdit(2, 0)
    assert sorted([Point(2), Point(1, 5)]) == [(1, 5), (2, 0)]
    assert len(edit) == 4 and edit[1] == 4 and edit[-2:] == ("x", None) and list(edit) == [1, 4, "x", None]
    assert edit.start == 1 and edit.end == 4 and edit.text == "x" and edit.note is None


def test_methods_properties_and_class_methods() -> None:
    for cls in (RecordEdit, TupleEdit):
        edit = cls(1, 4)
        assert edit.length == 3 and edit.moved(2) == (3, 6, "", None) and type(edit.moved(2)) is cls
        assert cls.at(7) == (7, 7, "", None) and type(cls.at(7)) is cls and cls.kind() == edit.kind() == "edit"


def test_make_replace_and_asdict() -> None:
    for cls in (RecordEdit, TupleEdit):
        edit = cls._make([1, 2, "t", None])
        assert type(edit) is cls and edit == (1, 2, "t", None)
        assert edit._replace(text="u") == (1, 2, "u", None) and type(edit._replace()) is cls
        assert edit._asdict() == {"start": 1, "end": 2, "text": "t", "note": None}
    for call in (lambda cls: cls._make([1]), lambda cls: cls._make(range(5)), lambda cls: cls(1, 2)._replace(size=3)):
        assert _raised(call, RecordEdit) == _raised(call, TupleEdit)


def _raised(call: typing.Callable[[type], object], cls: type) -> tuple[type, str]:
    with pytest.raises(Exception) as caught:  # whatever the NamedTuple raises
        call(cls)
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickled_and_copied(protocol: int) -> None:
    point = Point(3, [4])
    again = pickle.loads(pickle.dumps(point, protocol))
    assert again == point and type(again) is Point
    assert copy.copy(point) == point and type(copy.copy(point)) is Point
    deep = copy.deepcopy(point)
    assert deep == point and type(deep) is Point and deep.y is not point.y


@pytest.mark.skipif(not hasattr(copy, "replace"), reason="copy.replace is Python 3.13's")
def test_copy_replace() -> None:
    assert copy.replace(Point(1, 2), y=3) == Point(1, 3)  # type: ignore[attr-defined]


def test_pattern_matching_by_position_and_by_name() -> None:
    match Point(1, 2):
        case Point(1, y=2):
            matched = True
        case _:
            matched = False
    assert matched


def test_a_method_may_call_super() -> None:
    """`super()` needs the class cell that the class body hands over (`typing.NamedTuple` refuses it before 3.12)."""

    class Shown(Record):
        x: int

        def __str__(self) -> str:
            return f"<{super().__str__()}>"

    assert str(Shown(1)) == "<Shown(x=1)>"


def test_a_subclass_of_a_record_is_an_ordinary_class() -> None:
    class Labelled(Point):
        @property
        def label(self) -> str:
            return f"{self.x},{self.y}"

    labelled = Labelled(1, 2)
    assert labelled.label == "1,2" and repr(labelled) == "Labelled(x=1, y=2)" and labelled._fields == ("x", "y")
    assert type(labelled._replace(x=5)) is Labelled


def test_annotations_are_kept_and_never_evaluated() -> None:
    class Later(Record):
        thing: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821 - never evaluated at run time
        count: int = 0

    assert Later._fields == ("thing", "count")
    assert Later.__annotations__ == {"thing": "NotDefinedAnywhere", "count": "int"}
    assert typing.get_type_hints(Point) == {"x": int, "y": int}  # a reader of annotations still reads them


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("_hidden: int", ValueError),
        ("a: int = 1\n    b: int", TypeError),
        ("a: int = 1\n    b: int = 2\n    c: int", TypeError),
        ("a: int\n    def _replace(self): pass", AttributeError),
        ("a: int\n    __slots__ = ('a',)", AttributeError),
    ],
)
def test_a_class_a_named_tuple_refuses_is_refused_alike(body: str, error: type) -> None:
    raised = []
    for base in (Record, NamedTuple):
        code = f"from __future__ import annotations\nclass Bad(Base):\n    {body}\n"
        with pytest.raises(error) as caught:
            exec(code, {"Base": base})  # the same class text, with each base
        raised.append(str(caught.value))
    assert raised[0] == raised[1]


def test_a_record_without_fields() -> None:
    class Nothing(Record):
        """No field."""

    class AlsoNothing(NamedTuple):
        """No field."""

    assert Nothing() == AlsoNothing() == () and Nothing._fields == AlsoNothing._fields == ()
    assert repr(Nothing()) == "Nothing()" and repr(AlsoNothing()) == "AlsoNothing()"
    assert _outcome(Nothing, (1,), {}) == (TypeError, "Nothing.__new__() takes 1 positional argument but 2 were given")
    assert _outcome(AlsoNothing, (1,), {})[1] == "AlsoNothing.__new__() takes 1 positional argument but 2 were given"


def test_a_record_derives_from_record_alone() -> None:
    with pytest.raises(TypeError, match="derives from Record alone"):

        class Both(Record, dict):  # type: ignore[misc]
            a: int


# Every record of the package, read from its source and from the class it made.


def _record_classes_in_the_source() -> dict[tuple[str, str], ast.ClassDef]:
    """(module, class name) -> the class's AST, for every `class X(Record)` of cfgopt/."""
    found = {}
    for path in sorted((ROOT / "cfgopt").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "Record" for b in node.bases):
                found[(module, node.name)] = node
    return found


def _made_by_record(value: object) -> bool:
    new = getattr(value, "__new__", None)
    return isinstance(value, type) and getattr(new, "__module__", "") == "cfgopt.text.record"


def test_every_record_of_the_package_has_the_fields_its_body_writes() -> None:
    """Fields in the order annotated, the defaults given (literals compared by value), and nothing else made a
    record: the classes found in the imported modules are the ones the source declares."""
    declared = _record_classes_in_the_source()
    assert len(declared) >= 79
    made = {}
    for module in sorted({module for module, _ in declared}):
        for name, value in vars(importlib.import_module(module)).items():
            if _made_by_record(value) and value.__module__ == module:
                made[(module, name)] = value
    assert made.keys() == declared.keys()
    for key, node in declared.items():
        cls = made[key]
        annotated = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        assert cls._fields == tuple(s.target.id for s in annotated) == tuple(cls.__annotations__), key
        assert list(cls._field_defaults) == [s.target.id for s in annotated if s.value is not None], key
        for statement in annotated:
            if statement.value is not None and _is_literal(statement.value):
                assert cls._field_defaults[statement.target.id] == ast.literal_eval(statement.value), key
        values = cls._make(range(len(cls._fields)))
        assert values == tuple(range(len(cls._fields))) and not hasattr(values, "__dict__")


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True
