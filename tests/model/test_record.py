"""``@record`` behaves as ``@dataclass(frozen=True, slots=True)`` does, method for method."""

from __future__ import annotations

import dataclasses
import pickle
from typing import ClassVar

import pytest

from envdoctor.model.probed import Found
from envdoctor.model.record import FrozenInstanceError, field, fields, is_record, record, replace


@record
class Gpu:
    index: int
    name: str
    uuid: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)


@dataclasses.dataclass(frozen=True, slots=True)
class StockGpu:
    index: int
    name: str
    uuid: str = dataclasses.field(default="", compare=False)
    secret: str = dataclasses.field(default="", repr=False)


@record
class OtherGpu:
    index: int
    name: str


@record
class Empty:
    pass


@record
class Custom:
    a: int
    b: int = field(default=0, hash=False)

    def __repr__(self) -> str:
        return f"<custom {self.a}>"


@dataclasses.dataclass(frozen=True, slots=True)
class StockCustom:
    a: int
    b: int = dataclasses.field(default=0, hash=False)

    def __repr__(self) -> str:
        return f"<custom {self.a}>"


@record
class OwnEquality:
    a: int

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 42


def test_repr_eq_and_hash_match_the_stock_dataclass() -> None:
    ours, stock = Gpu(0, "H100", "GPU-1", "s"), StockGpu(0, "H100", "GPU-1", "s")
    assert repr(ours) == repr(stock).replace("StockGpu", "Gpu")
    assert repr(ours) == "Gpu(index=0, name='H100', uuid='GPU-1')"
    assert hash(ours) == hash(stock)
    assert (ours == Gpu(0, "H100", "GPU-other")) == (stock == StockGpu(0, "H100", "GPU-other"))


def test_equality_needs_the_same_class_and_the_compared_fields() -> None:
    assert Gpu(0, "H100", uuid="a") == Gpu(0, "H100", uuid="b")  # uuid: compare=False
    assert Gpu(0, "H100") != Gpu(1, "H100")
    look_alikes: list[object] = [OtherGpu(0, "H100"), (0, "H100")]
    assert all(Gpu(0, "H100") != other for other in look_alikes)
    assert Empty() == Empty() and hash(Empty()) == hash(())
    assert len({Gpu(0, "H100", uuid="a"), Gpu(0, "H100", uuid="b"), Gpu(1, "A100")}) == 2


def test_methods_in_the_class_body_and_field_hash_are_kept_as_dataclass_keeps_them() -> None:
    assert repr(Custom(1)) == repr(StockCustom(1)) == "<custom 1>"
    assert hash(Custom(1, 2)) == hash(Custom(1, 3)) == hash(StockCustom(1, 3))  # b: hash=False
    assert Custom(1, 2) != Custom(1, 3)  # ... but still compared
    assert OwnEquality(1) == OwnEquality(2) and hash(OwnEquality(1)) == 42


def test_a_field_is_equal_to_itself_even_when_it_is_nan() -> None:
    nan = float("nan")  # tuples compare identity first, so @dataclass calls these equal
    assert StockCustom(0, nan) == StockCustom(0, nan)  # type: ignore[arg-type]  # a float
    assert Custom(0, nan) == Custom(0, nan)  # type: ignore[arg-type]
    assert Custom(nan, 0) == Custom(nan, 0)  # type: ignore[arg-type]


def test_it_is_frozen_and_slotted() -> None:
    gpu = Gpu(0, "H100")
    with pytest.raises(FrozenInstanceError):
        gpu.name = "A100"  # type: ignore[misc]  # the point: assignment must fail
    with pytest.raises(AttributeError):  # what code written for a dataclass catches
        del gpu.name
    assert not hasattr(gpu, "__dict__")
    assert Gpu.__dict__["__slots__"] == ("index", "name", "uuid", "secret")


def test_fields_replace_pickle_and_patterns_work_as_for_a_dataclass() -> None:
    gpu = Gpu(0, "H100", "GPU-1")
    stock = StockGpu(0, "H100", "GPU-1")
    assert [f.name for f in fields(gpu)] == [f.name for f in dataclasses.fields(stock)]
    assert [(f.compare, f.repr) for f in fields(Gpu)] == [
        (f.compare, f.repr) for f in dataclasses.fields(StockGpu)
    ]
    assert replace(gpu, index=3) == Gpu(3, "H100", "GPU-1")
    assert replace(gpu, index=3).secret == dataclasses.replace(stock, index=3).secret
    with pytest.raises(TypeError):
        replace(gpu, colour="red")  # not a field
    assert pickle.loads(pickle.dumps(gpu)) == gpu  # noqa: S301 (our own bytes, just made)
    match gpu:
        case Gpu(0, name):
            assert name == "H100"
        case _:
            pytest.fail("positional pattern did not match")
    assert Found(3) == Found(3) != Found(4) and repr(Found(3)) == "Found(value=3)"


@record
class Job:
    name: str
    tags: list[str] = field(default_factory=list)
    retries: int = 3


@dataclasses.dataclass(frozen=True, slots=True)
class StockJob:
    name: str
    tags: list[str] = dataclasses.field(default_factory=list)
    retries: int = 3


@pytest.mark.parametrize("cls", [Job, StockJob], ids=["record", "dataclass"])
def test_the_constructor_takes_what_the_generated_one_takes(cls: type[Job]) -> None:
    assert cls("a") == cls(name="a", tags=[], retries=3)
    assert cls("a", ["x"], 5).retries == cls("a", retries=5).retries == 5
    assert cls("a").tags is not cls("a").tags  # a fresh list from the factory, every time
    with pytest.raises(TypeError):
        cls()  # type: ignore[call-arg]  # the point: name is required
    with pytest.raises(TypeError):
        cls("a", [], 3, "extra")  # type: ignore[call-arg]  # one positional too many
    with pytest.raises(TypeError):
        cls("a", name="b")  # type: ignore[misc]  # name given twice
    with pytest.raises(TypeError):
        cls("a", colour="red")  # type: ignore[call-arg]  # not a field


def test_post_init_runs_after_the_fields_are_set() -> None:
    @record
    class Checked:
        low: int
        high: int

        def __post_init__(self) -> None:
            if self.low > self.high:
                raise ValueError("low > high")

    assert Checked(1, 2).high == 2
    with pytest.raises(ValueError, match="low > high"):
        Checked(3, 2)


def test_copies_and_pickles_are_equal_and_still_frozen() -> None:
    import copy

    job = Job("train", ["a"], 1)
    for clone in (copy.copy(job), copy.deepcopy(job), pickle.loads(pickle.dumps(job))):  # noqa: S301
        assert clone == job and clone is not job
        with pytest.raises(FrozenInstanceError):
            clone.retries = 2  # type: ignore[misc]  # the point: assignment must fail


def test_a_field_outside_the_constructor_gets_its_default() -> None:
    @record
    class Counted:
        name: str
        seen: int = field(default=0, init=False)
        tags: list[str] = field(default_factory=list, init=False)

    @dataclasses.dataclass(frozen=True, slots=True)
    class StockCounted:
        name: str
        seen: int = dataclasses.field(default=0, init=False)
        tags: list[str] = dataclasses.field(default_factory=list, init=False)

    ours, stock = Counted("a"), StockCounted("a")
    assert (ours.seen, ours.tags) == (stock.seen, stock.tags) == (0, [])
    with pytest.raises(TypeError):
        Counted("a", 3)  # type: ignore[call-arg]  # not a constructor argument
    with pytest.raises(ValueError, match="init=False"):
        replace(ours, seen=2)
    with pytest.raises(ValueError, match="init=False"):
        dataclasses.replace(stock, seen=2)


def test_help_names_the_fields_of_a_record_without_a_docstring() -> None:
    assert Gpu.__doc__ == "Gpu(index, name, uuid, secret)"
    assert Found.__doc__ is not None and "Gpu(" not in Found.__doc__  # its own docstring stays


def test_a_record_is_not_a_dataclass_and_says_so() -> None:
    assert is_record(Gpu) and is_record(Gpu(0, "H100"))
    assert not is_record(StockGpu(0, "H100")) and not dataclasses.is_dataclass(Gpu)
    with pytest.raises(TypeError, match="not a record"):
        fields(StockGpu)


def test_class_variables_are_not_fields() -> None:
    @record
    class Step:
        kind: ClassVar[str] = "stop-service"
        unit: str

    assert [f.name for f in fields(Step)] == ["unit"]
    assert Step("x") == Step(unit="x") and Step("x").kind == "stop-service"
    assert repr(Step("x")).endswith(".Step(unit='x')")  # the qualified name, as @dataclass


def test_declarations_dataclass_refuses_are_refused() -> None:
    with pytest.raises(ValueError, match="mutable default"):

        @record
        class Listed:
            tags: list[str] = []  # noqa: RUF012 (the point: refused)

    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @record
        class Ordered:
            a: int = 0
            b: int  # type: ignore[misc]  # the point: refused

    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=[], default_factory=list)  # type: ignore[call-overload]


def test_a_generic_record_is_still_subscriptable() -> None:
    assert Found[int].__origin__ is Found  # type: ignore[attr-defined]  # a typing alias
    assert Found[int](3) == Found(3)
    assert Found.__qualname__ == "Found" and Found.__module__ == "envdoctor.model.probed"


def test_slips_a_stock_dataclass_refuses_are_refused_too() -> None:
    import typing as t

    @record
    class Aliased:
        kind: t.ClassVar[str] = "x"
        unit: str

    assert [f.name for f in fields(Aliased)] == ["unit"]
    with pytest.raises(TypeError, match="no type annotation"):

        @record
        class Unannotated:
            x = field(default=1)

    with pytest.raises(TypeError, match=r"use envdoctor\.model\.record\.field"):

        @record
        class Stock:
            x: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError, match="cannot overwrite __setattr__"):

        @record
        class Mutable:
            x: int

            def __setattr__(self, name: str, value: object) -> None:
                object.__setattr__(self, name, value)

    @record
    class Matched:
        x: int
        y: int
        __match_args__ = ("y",)

    assert Matched.__match_args__ == ("y",)
