"""Ledger znode paths: the layouts of BookKeeper's ledger managers, both ways."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import InvalidArgument
from services.metadata import (
    CorruptMetadata,
    LedgerLayout,
    LedgerPaths,
    hierarchical_ledger_id,
    hybrid_hierarchical_path,
    is_special_znode,
    layout_text,
    long_hierarchical_path,
    parse_layout,
    short_hierarchical_path,
)


@pytest.mark.parametrize(
    ("ledger_id", "expected"),
    [(1, "00/0000/L0001"), (123456789, "01/2345/L6789"), (2147483646, "21/4748/L3646")],
)
def test_short_path_splits_2_4_4(ledger_id: int, expected: str) -> None:
    """The short layout is %010d split 2-4-4 with L before the last part."""
    assert expected == short_hierarchical_path(ledger_id)


@pytest.mark.parametrize(
    ("ledger_id", "expected"),
    [
        (4294967296, "000/0000/0042/9496/L7296"),
        (1, "000/0000/0000/0000/L0001"),
        (2**63 - 1, "922/3372/0368/5477/L5807"),
    ],
)
def test_long_path_splits_3_4_4_4_4(ledger_id: int, expected: str) -> None:
    """The long layout is %019d split 3-4-4-4-4 with L before the last part."""
    assert expected == long_hierarchical_path(ledger_id)


@pytest.mark.parametrize(
    ("ledger_id", "expected"),
    [
        (2147483646, "21/4748/L3646"),
        (2147483647, "000/0000/0021/4748/L3647"),
        (4294967296, "000/0000/0042/9496/L7296"),
    ],
)
def test_hybrid_switches_to_long_at_integer_max(ledger_id: int, expected: str) -> None:
    """Ids below Integer.MAX_VALUE are short; Integer.MAX_VALUE and above are long."""
    assert expected == hybrid_hierarchical_path(ledger_id)


def test_default_paths_use_root_and_hybrid_layout() -> None:
    """LedgerPaths defaults to /ledgers and the hybrid layout."""
    paths = LedgerPaths()
    assert paths.ledger_path(1) == "/ledgers/00/0000/L0001"
    assert paths.ledger_path(4294967296) == "/ledgers/000/0000/0042/9496/L7296"


def test_flat_and_custom_root() -> None:
    """The flat layout is L%010d directly under a configurable root."""
    paths = LedgerPaths("/bk/ledgers/", LedgerLayout.FLAT)
    assert paths.ledger_path(42) == "/bk/ledgers/L0000000042"
    assert paths.ledger_id("/bk/ledgers/L0000000042") == 42


def test_short_layout_rejects_ids_beyond_ten_digits() -> None:
    """The legacy layout cannot store ids ≥ 10^10: InvalidArgument naming ledger_id."""
    with pytest.raises(InvalidArgument) as err:
        short_hierarchical_path(10**10)
    assert err.value.field == "ledger_id"


@pytest.mark.parametrize("bad", [-1, 2**63, True, "7"])
def test_invalid_ids_are_rejected(bad: object) -> None:
    """Negative, oversized and non-integer ids raise InvalidArgument naming ledger_id."""
    with pytest.raises(InvalidArgument) as err:
        hybrid_hierarchical_path(bad)  # type: ignore[arg-type]
    assert err.value.field == "ledger_id"


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_hybrid_path_parses_back(ledger_id: int) -> None:
    """Every id survives id → hybrid path → id."""
    paths = LedgerPaths()
    assert ledger_id == paths.ledger_id(paths.ledger_path(ledger_id))


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_long_path_parses_back(ledger_id: int) -> None:
    """Every id survives id → long path → id."""
    paths = LedgerPaths(layout=LedgerLayout.LONG_HIERARCHICAL)
    assert ledger_id == paths.ledger_id(paths.ledger_path(ledger_id))


def test_parse_concatenates_parts() -> None:
    """Parsing drops the leaf's L and concatenates the digits (StringUtils)."""
    assert hierarchical_ledger_id("01/2345/L6789") == 123456789
    assert hierarchical_ledger_id("000/0000/0042/9496/L7296") == 4294967296


@pytest.mark.parametrize(
    "bad",
    ["01/2345/6789", "01/2345", "01/23x5/L6789", "available/readonly/x", "01/2345/L67/89"],
)
def test_parse_rejects_non_ledger_paths(bad: str) -> None:
    """Paths that are not 3 or 5 digit levels with an L leaf raise InvalidArgument('path')."""
    with pytest.raises(InvalidArgument) as err:
        hierarchical_ledger_id(bad)
    assert err.value.field == "path"


def test_ledger_id_rejects_paths_outside_root() -> None:
    """A path under another root does not name a ledger of this root."""
    with pytest.raises(InvalidArgument):
        LedgerPaths("/ledgers").ledger_id("/other/00/0000/L0001")


@pytest.mark.parametrize(
    "name",
    [
        "available",
        "cookies",
        "LAYOUT",
        "INSTANCEID",
        "underreplication",
        "idgen",
        "idgen-long",
        "ID-0000000001",
    ],
)
def test_special_znodes(name: str) -> None:
    """BookKeeper's special znodes are never ledger parents."""
    assert is_special_znode(name)
    assert not LedgerPaths().is_ledger_parent(name)


@pytest.mark.parametrize(
    ("layout", "name", "expected"),
    [
        (LedgerLayout.HIERARCHICAL, "00", True),
        (LedgerLayout.HIERARCHICAL, "000", True),
        (LedgerLayout.HIERARCHICAL, "0000", False),
        (LedgerLayout.HIERARCHICAL, "x1", False),
        (LedgerLayout.LEGACY_HIERARCHICAL, "000", False),
        (LedgerLayout.LONG_HIERARCHICAL, "00", False),
        (LedgerLayout.LONG_HIERARCHICAL, "000", True),
    ],
)
def test_level0_regex(layout: LedgerLayout, name: str, expected: bool) -> None:
    """Level-0 children must match \\d{2} (short), \\d{3} (long) or \\d{2,3} (hybrid)."""
    assert expected == LedgerPaths(layout=layout).is_ledger_parent(name)


@pytest.mark.parametrize("root", ["ledgers", "/", "//x"])
def test_root_must_be_absolute(root: str) -> None:
    """A malformed root raises InvalidArgument naming root."""
    with pytest.raises(InvalidArgument) as err:
        LedgerPaths(root)
    assert err.value.field == "root"


def test_layout_text_matches_bookkeeper() -> None:
    """LAYOUT content is '2\\n<factory class>:1' (LedgerLayout.serialize)."""
    expected = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
    assert expected == layout_text(LedgerLayout.HIERARCHICAL)


def test_pulsar_factory_means_hybrid_paths() -> None:
    """Pulsar's own ledger manager factory always uses the hybrid paths."""
    text = b"2\norg.apache.pulsar.metadata.bookkeeper.PulsarLedgerManagerFactory:1"
    assert parse_layout(text, path="/ledgers/LAYOUT") == LedgerLayout.HIERARCHICAL


@pytest.mark.parametrize("data", [b"", b"garbage", b"x\nfoo:1"])
def test_garbled_layout_is_corrupt(data: bytes) -> None:
    """Unparsable LAYOUT content raises CorruptMetadata naming the znode."""
    with pytest.raises(CorruptMetadata) as err:
        parse_layout(data, path="/ledgers/LAYOUT")
    assert err.value.path == "/ledgers/LAYOUT"
