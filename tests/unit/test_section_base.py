"""Every section's ``==``, ``hash()``, ``repr()`` and frozenness (written once in
mlaprof.analysis.section_base) decide what ``dataclass`` would generate for the same class: each
section class is checked against a twin made by ``dataclasses.make_dataclass`` with the same
fields and flags, on the same values."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from mlaprof.analysis import sections
from mlaprof.analysis.section_base import Section, section

CLASSES = [
    c
    for _, c in inspect.getmembers(sections, inspect.isclass)
    if c.__module__ == sections.__name__ and dataclasses.is_dataclass(c)
]


def _twin(cls: type) -> type:
    """The class as ``@dataclass(frozen=True)`` would make it: generated methods."""
    spec = [
        (f.name, Any, dataclasses.field(repr=f.repr, compare=f.compare, hash=f.hash))
        for f in dataclasses.fields(cls)
    ]
    twin = dataclasses.make_dataclass(cls.__name__, spec, frozen=True)
    twin.__qualname__ = cls.__qualname__
    return twin


def _values(cls: type, salt: int = 0) -> dict[str, Any]:
    return {f.name: (i + salt, f.name) for i, f in enumerate(dataclasses.fields(cls))}


def test_every_section_class_is_made_by_section() -> None:
    assert len(CLASSES) >= 70
    assert all(issubclass(c, Section) and c.__eq__ is Section.__eq__ for c in CLASSES)
    # one __setattr__ (frozen) for all, none generated per class; dataclass reads them frozen
    assert all(c.__dataclass_params__.frozen and "__setattr__" not in vars(c) for c in CLASSES)
    assert all("__init__" in vars(c) for c in CLASSES) and "__init__" not in vars(Section)


def test_init_sets_the_fields_in_c_never_through_the_frozen_setattr(monkeypatch) -> None:
    """A shared Python ``__setattr__`` on the path of ``__init__`` made building a fleet's
    rows 5x slower: each class's ``__init__`` sets its fields with ``object.__setattr__``."""
    calls: list[str] = []
    monkeypatch.setattr(Section, "__setattr__", lambda self, n, v: calls.append(n))
    built = [cls(**_values(cls)) for cls in CLASSES]
    assert calls == [] and all(
        getattr(b, f.name) == v for b in built for f, v in
        zip(dataclasses.fields(b), _values(type(b)).values(), strict=True)
    )  # fmt: skip


def test_init_takes_defaults_factories_and_post_init_as_dataclass_does() -> None:
    seen: list[Any] = []

    @section
    class Probe(Section):
        a: int
        b: int = 2
        c: list[int] = dataclasses.field(default_factory=list)

        def __post_init__(self) -> None:
            seen.append((self.a, self.b, self.c))

    p, q = Probe(1), Probe(1, 3, [4])
    assert (p.a, p.b, p.c, q.b, q.c) == (1, 2, [], 3, [4]) and p.c is not Probe(1).c
    assert seen[:2] == [(1, 2, []), (1, 3, [4])]
    with pytest.raises(TypeError):
        Probe()
    assert copy.copy(q) == q
    real = CLASSES[0](**_values(CLASSES[0]))  # a module's class: pickled by name
    assert pickle.loads(pickle.dumps(real)) == real
    with pytest.raises(TypeError, match="non-default argument 'd' follows default argument"):

        @section
        class Late(Section):
            a: int = 0
            d: int

    with pytest.raises(TypeError, match="all positional"):

        @section
        class Keyword(Section):
            a: int = dataclasses.field(default=0, kw_only=True)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_as_the_generated_methods_decide(cls: type) -> None:
    twin = _twin(cls)
    a, t = cls(**_values(cls)), twin(**_values(cls))
    assert repr(a) == repr(t)
    assert hash(a) == hash(t)
    assert a == cls(**_values(cls)) and t == twin(**_values(cls))
    for f in dataclasses.fields(cls):  # each field changed alone
        other = {**_values(cls), f.name: ("changed",)}
        assert (a == cls(**other)) == (t == twin(**other)), f.name
        if f.compare:
            assert a != cls(**other)
    assert (a == t) is False and a.__eq__(t) is NotImplemented  # another class is never equal
    for f in dataclasses.fields(cls):  # set once, by __init__
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(a, f.name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(a, f.name)
    assert copy.deepcopy(a) == a and dataclasses.replace(a) == a


def test_a_field_out_of_comparison_is_out_of_eq_and_hash_and_a_hidden_one_out_of_repr() -> None:
    @section
    class Probe(Section):
        shown: int
        quiet: int = dataclasses.field(default=0, compare=False)
        hidden: int = dataclasses.field(default=0, repr=False)

    a = Probe(1, quiet=2, hidden=3)
    assert a == Probe(1, quiet=9, hidden=3) and hash(a) == hash((1, 3))
    assert a != Probe(1, quiet=2, hidden=4)
    assert repr(a) == "test_a_field_out_of_comparison_is_out_of_eq_and_hash_and_a_hidden_one_" \
        "out_of_repr.<locals>.Probe(shown=1, quiet=2)"  # fmt: skip


def test_a_class_outside_the_base_is_refused() -> None:
    with pytest.raises(TypeError, match="derives from Section"):

        @section
        class Plain:
            x: int


def test_a_frozen_dataclass_extends_a_section_as_docs_views_shows() -> None:
    """A later analysis adds a field by a ``@dataclass(frozen=True, slots=True)`` subclass
    (docs/views.md); the subclass is frozen, its base's fields too."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class WithMore(sections.RunState):
        more: int = 0

    w = WithMore(status="finished", reason=None, steps_committed=1, last_step=0,
                 committed="1 step", per_rank=[], text="", more=2)  # fmt: skip
    assert dataclasses.fields(WithMore)[-1].name == "more" and w.more == 2
    for name in ("more", "status"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(w, name, 3)
    with pytest.raises(TypeError, match="non-frozen dataclass from a frozen one"):

        @dataclasses.dataclass
        class Thawed(sections.RunState):
            more: int = 0


def test_init_is_compiled_at_the_first_instance_and_then_called_directly() -> None:
    """Compiling every class's ``__init__`` at import was most of what loading the sections
    cost each first report, which makes about a third of them: each is compiled at its class's
    first instance, once, and takes its place; what it refuses is refused at class creation."""

    @section
    class Probe(Section):
        a: int
        b: int = 2

    stub = vars(Probe)["__init__"]
    assert Probe(1).b == 2
    compiled = vars(Probe)["__init__"]
    assert compiled is not stub and list(inspect.signature(compiled).parameters)[1:] == ["a", "b"]
    assert Probe(3, 4).b == 4 and vars(Probe)["__init__"] is compiled  # compiled once

    class Plain(Probe):  # a subclass that is no section: the base's, compiled for the base
        __slots__ = ()

    @section
    class Other(Section):
        a: int

    first = vars(Other)["__init__"]
    assert Plain(5).a == 5 and vars(Other)["__init__"] is first  # another class: not compiled
