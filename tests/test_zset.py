"""Unit tests of the Z-set algebra (DBSP §4), row identity keys and the state codec."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from matview.keys import canonical, group_key, row_key
from matview.storage.codec import pack, unpack
from matview.storage.state import sqlite_order
from matview.zset import IndexedZSet, ZSet

rows = st.tuples(st.integers(0, 5), st.sampled_from(["a", "b", None]))
zsets = st.lists(st.tuples(rows, st.integers(-3, 3)), max_size=12).map(ZSet)


@given(zsets, zsets, zsets)
def test_abelian_group_laws(a: ZSet, b: ZSet, c: ZSet) -> None:
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert a + ZSet() == a
    assert a + (-a) == ZSet()
    assert a - b == a + (-b)


@given(zsets)
def test_consolidation_drops_zero_weights(a: ZSet) -> None:
    assert all(weight != 0 for _, weight in a.items())
    doubled = a + a
    assert all(doubled.weight(row) == 2 * a.weight(row) for row in a)


def test_add_and_cancel() -> None:
    z: ZSet = ZSet()
    z.add(("x",), 2)
    z.add(("x",), -2)
    assert not z and len(z) == 0


@given(zsets, zsets)
def test_filter_and_map_are_linear(a: ZSet, b: ZSet) -> None:
    keep = lambda row: row[0] % 2 == 0  # noqa: E731
    assert (a + b).filter(keep) == a.filter(keep) + b.filter(keep)
    first = lambda row: row[0]  # noqa: E731
    assert (a + b).map(first) == a.map(first) + b.map(first)


@given(zsets)
def test_distinct_is_a_set_of_the_positive_rows(a: ZSet) -> None:
    d = a.distinct()
    assert d.is_set()
    assert set(d) == {row for row, weight in a.items() if weight > 0}


@given(zsets)
def test_indexed_zset_flattens_back(a: ZSet) -> None:
    indexed = a.index_by(lambda row: row[1])
    assert indexed.flatten() == a
    for key, group in indexed.items():
        assert all(row[1] == key for row in group)


def test_indexed_zset_drops_empty_groups() -> None:
    idx: IndexedZSet = IndexedZSet()
    idx.add("k", ("r",), 1)
    idx.add("k", ("r",), -1)
    assert len(idx) == 0 and idx.group("k") == ZSet()


def test_row_key_keeps_storage_classes_apart() -> None:
    keys = {row_key((v,)) for v in (1, 1.0, "1", b"1", None)}
    assert len(keys) == 5


def test_group_key_follows_sqlite_equality() -> None:
    assert group_key((1,), ("BINARY",)) == group_key((1.0,), ("BINARY",))
    assert group_key(("ABC",), ("NOCASE",)) == group_key(("abc",), ("NOCASE",))
    assert group_key(("ÄB",), ("NOCASE",)) != group_key(("äb",), ("NOCASE",))  # NOCASE folds ASCII only
    assert group_key(("a  ",), ("RTRIM",)) == group_key(("a",), ("RTRIM",))
    assert group_key(("a",), ("BINARY",)) != group_key(("A",), ("BINARY",))
    assert canonical(2.0**70) == 2.0**70  # beyond int64: stays a float
    assert group_key((2**53 + 1,), ("BINARY",)) != group_key((float(2**53),), ("BINARY",))


def test_sqlite_order() -> None:
    values = [b"\x00", "b", "a", 2.5, 2, None, -1]
    assert sorted(values, key=sqlite_order) == [None, -1, 2, 2.5, "a", "b", b"\x00"]


@given(
    st.recursive(
        st.none() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
        lambda inner: st.lists(inner, max_size=4),
        max_leaves=10,
    )
)
def test_codec_round_trips(value: object) -> None:
    assert unpack(pack(value)) == value
