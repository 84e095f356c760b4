"""Differential: random sequences of puts, deletes, delete ranges, lists and gets, sent through
the real `oxia` client to a three-shard devstack server, against a plain dictionary model of
Oxia's rules (hierarchical order, versions, conditional writes, floor/ceiling gets)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devstack.oxia import running_in_thread

from .conftest import oxia
from .test_semantics import hierarchical

# "a-b" and "a0" sort on either side of "a/…" byte-wise, but both below it in Oxia's order.
SEGMENTS = ["a", "b", "ab", "a-b", "a0", "z"]
PATHS = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)


@contextlib.contextmanager
def fresh_client() -> Iterator[Any]:
    """A client of a new, empty server: keys left by another example would be found by
    floor/ceiling gets and ranges the model knows nothing about."""
    with running_in_thread(shards=3) as server:
        client = oxia.Client(server.address)
        try:
            yield client
        finally:
            client.close()


@dataclass
class Model:
    records: dict[str, tuple[bytes, int, int]]  # value, version id, modifications count

    def in_range(self, start: str, end: str) -> list[str]:
        low, high = hierarchical(start), hierarchical(end)
        return sorted((k for k in self.records if low <= hierarchical(k) < high), key=hierarchical)

    def nearest(self, key: str, comparison: str) -> str | None:
        target = hierarchical(key)
        order = sorted(self.records, key=hierarchical)
        below = [k for k in order if hierarchical(k) <= target]
        above = [k for k in order if hierarchical(k) >= target]
        if comparison == "FLOOR":
            return below[-1] if below else None
        if comparison == "LOWER":
            below = [k for k in below if k != key]
            return below[-1] if below else None
        if comparison == "CEILING":
            return above[0] if above else None
        above = [k for k in above if k != key]
        return above[0] if above else None


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), PATHS, st.sampled_from(["none", "right", "stale", "absent"])),
        st.tuples(st.just("delete"), PATHS, st.sampled_from(["none", "right", "stale"])),
        st.tuples(st.just("delete_range"), PATHS, PATHS),
        st.tuples(st.just("list"), PATHS, PATHS),
        st.tuples(
            st.just("get"), PATHS, st.sampled_from(["EQUAL", "FLOOR", "CEILING", "LOWER", "HIGHER"])
        ),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(ops=OPS)
def test_the_server_agrees_with_a_model_of_oxia(ops: list[tuple[str, str, str]]):
    with fresh_client() as client:
        _run(client, ops)


def _run(shared: Any, ops: list[tuple[str, str, str]]) -> None:
    # Every key of an example is under one prefix and routed by it to one shard, where the
    # server's own order is what `list` returns (across shards the client re-sorts).
    prefix = f"/m{uuid.uuid4().hex[:8]}/"
    model = Model({})
    for op, first, second in ops:
        step = {"put": _put, "delete": _delete, "delete_range": _delete_range}.get(op)
        if step is not None:
            step(shared, model, prefix + first, second if op != "delete_range" else prefix + second)
        elif op == "list":
            assert shared.list(prefix + first, prefix + second, partition_key=prefix) == (
                model.in_range(prefix + first, prefix + second)
            )
        else:
            _get(shared, model, prefix + first, second, prefix)


def _expected(model: Model, key: str, kind: str) -> int | None:
    current = model.records.get(key)
    if kind == "right":
        return current[1] if current else oxia.EXPECTED_RECORD_DOES_NOT_EXIST
    if kind == "stale":
        return current[1] - 1 if current else 0
    return oxia.EXPECTED_RECORD_DOES_NOT_EXIST if kind == "absent" else None


def _put(client: Any, model: Model, key: str, kind: str) -> None:
    expected = _expected(model, key, kind)
    current = model.records.get(key)
    fails = kind == "stale" or (kind == "absent" and current is not None)
    value = uuid.uuid4().bytes
    if fails:
        with pytest.raises(oxia.ex.UnexpectedVersionId):
            client.put(key, value, partition_key=_partition(key), expected_version_id=expected)
        return
    _, version = client.put(key, value, partition_key=_partition(key), expected_version_id=expected)
    assert version.modifications_count() == (current[2] + 1 if current else 0)
    assert current is None or version.version_id() > current[1]
    model.records[key] = (value, version.version_id(), version.modifications_count())


def _delete(client: Any, model: Model, key: str, kind: str) -> None:
    expected = _expected(model, key, kind)
    current = model.records.get(key)
    # Oxia checks the expected version first: a missing key with one other than -1 fails.
    if kind == "stale" or (current is None and expected not in (None, -1)):
        with pytest.raises(oxia.ex.UnexpectedVersionId):
            client.delete(key, partition_key=_partition(key), expected_version_id=expected)
        return
    deleted = client.delete(key, partition_key=_partition(key), expected_version_id=expected)
    assert deleted == (current is not None)
    model.records.pop(key, None)


def _delete_range(client: Any, model: Model, start: str, end: str) -> None:
    client.delete_range(start, end, partition_key=_partition(start))
    for key in model.in_range(start, end):
        del model.records[key]


def _get(client: Any, model: Model, key: str, comparison: str, prefix: str) -> None:
    want = key if comparison == "EQUAL" and key in model.records else None
    if comparison != "EQUAL":
        want = model.nearest(key, comparison)
    kind = getattr(oxia.ComparisonType, comparison)
    if want is None:
        with pytest.raises(oxia.ex.KeyNotFound):
            client.get(key, partition_key=prefix, comparison_type=kind)
        return
    got, value, version = client.get(key, partition_key=prefix, comparison_type=kind)
    assert (got, value, version.version_id()) == (want, *model.records[want][:2])


def _partition(key: str) -> str:
    """Every key of one example on one shard: its prefix, the first two characters' path."""
    return key[: key.index("/", 1) + 1]
