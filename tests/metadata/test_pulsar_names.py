"""Topic names, managed-ledger names and the metadata paths derived from them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import InvalidArgument
from services.metadata import (
    TopicName,
    cursor_path,
    java_url_decode,
    java_url_encode,
    managed_ledger_name,
    managed_ledger_path,
    partitioned_topic_path,
    schema_id_of,
    schema_path,
    topic_from_managed_ledger_name,
)


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("my-topic", "my-topic"),
        ("my topic", "my+topic"),
        ("a/b", "a%2Fb"),
        ("ü", "%C3%BC"),
        ("*._-", "*._-"),
        ("~!+", "%7E%21%2B"),
    ],
)
def test_java_url_encode(text: str, encoded: str) -> None:
    """Local names are encoded like java.net.URLEncoder (space → +, * kept, ~ escaped)."""
    assert encoded == java_url_encode(text)
    assert text == java_url_decode(encoded)


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.text(min_size=1))
def test_url_encoding_round_trips(text: str) -> None:
    """Every string survives encode then decode."""
    assert text == java_url_decode(java_url_encode(text))


def test_malformed_escape_is_rejected() -> None:
    """A stray % is an InvalidArgument, not silently kept."""
    with pytest.raises(InvalidArgument):
        java_url_decode("a%zz")


def test_managed_ledger_name_of_a_partition() -> None:
    """persistent://t/ns/x-partition-3 ↔ t/ns/persistent/x-partition-3."""
    assert managed_ledger_name("persistent://t/ns/x-partition-3") == "t/ns/persistent/x-partition-3"
    back = topic_from_managed_ledger_name("t/ns/persistent/x-partition-3")
    assert str(back) == "persistent://t/ns/x-partition-3"


def test_managed_ledger_name_encodes_local_name() -> None:
    """The local name is URL-encoded in the ML name and decoded back."""
    assert managed_ledger_name("persistent://t/ns/my topic:1") == "t/ns/persistent/my+topic%3A1"
    assert topic_from_managed_ledger_name("t/ns/persistent/my+topic%3A1").local_name == "my topic:1"


def test_short_topic_names_default_to_public_default() -> None:
    """A bare name means persistent://public/default/<name>."""
    assert managed_ledger_name("x") == "public/default/persistent/x"
    assert managed_ledger_name("t/ns/x") == "t/ns/persistent/x"


def test_v1_topic_names_keep_the_cluster() -> None:
    """persistent://t/cluster/ns/x maps to t/cluster/ns/persistent/x and back."""
    assert managed_ledger_name("persistent://t/c/ns/x") == "t/c/ns/persistent/x"
    topic = topic_from_managed_ledger_name("t/c/ns/persistent/x")
    assert TopicName("persistent", "t", "ns", "x", cluster="c") == topic


def test_non_persistent_topics_have_no_managed_ledger() -> None:
    """Only persistent topics have a managed ledger."""
    with pytest.raises(InvalidArgument) as err:
        managed_ledger_name("non-persistent://t/ns/x")
    assert err.value.field == "topic"


@pytest.mark.parametrize(
    ("topic", "field"),
    [
        ("", "topic"),
        ("bogus://t/ns/x", "topic"),
        ("persistent://t/x", "topic"),
        ("persistent://t/ns/", "topic"),
        ("persistent://t t/ns/x", "tenant"),
        ("persistent://t/n s/x", "namespace"),
    ],
)
def test_malformed_topics_name_the_field(topic: str, field: str) -> None:
    """A malformed topic raises InvalidArgument naming the bad part."""
    with pytest.raises(InvalidArgument) as err:
        TopicName.parse(topic)
    assert field == err.value.field


def test_schema_id_strips_partition_and_domain() -> None:
    """All partitions and domains share the schema id t/ns/<encoded base name>."""
    assert schema_id_of("persistent://t/ns/my topic-partition-7") == "t/ns/my+topic"
    assert schema_id_of("non-persistent://t/ns/my topic") == "t/ns/my+topic"


def test_non_numeric_partition_suffix_is_kept() -> None:
    """A -partition- suffix that is not a number is part of the name."""
    assert schema_id_of("persistent://t/ns/x-partition-a") == "t/ns/x-partition-a"


def test_metadata_paths() -> None:
    """The ML, cursor, schema and partitioned-topic znode paths."""
    assert managed_ledger_path("t/ns/persistent/x") == "/managed-ledgers/t/ns/persistent/x"
    assert cursor_path("t/ns/persistent/x", "my+sub") == "/managed-ledgers/t/ns/persistent/x/my+sub"
    assert schema_path("t/ns/x") == "/schemas/t/ns/x"
    expected = "/admin/partitioned-topics/t/ns/persistent/my+topic"
    assert expected == partitioned_topic_path("persistent://t/ns/my topic")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: managed_ledger_path("t/ns/x"), "ml_name"),
        (lambda: managed_ledger_path("t/ns/bogus/x"), "ml_name"),
        (lambda: managed_ledger_path("t//persistent/x"), "ml_name"),
        (lambda: cursor_path("t/ns/persistent/x", "a/b"), "cursor_name"),
        (lambda: cursor_path("t/ns/persistent/x", ""), "cursor_name"),
        (lambda: schema_path("t/ns"), "schema_id"),
    ],
)
def test_malformed_names_in_paths(call, field: str) -> None:
    """Paths are only built from valid names; the error names the field."""
    with pytest.raises(InvalidArgument) as err:
        call()
    assert field == err.value.field


def test_partitioned_metadata_path_of_a_partition_is_the_base_topic() -> None:
    """A partition's partitioned-topic metadata lives under the base topic's name."""
    expected = "/admin/partitioned-topics/t/ns/persistent/x"
    assert expected == partitioned_topic_path("persistent://t/ns/x-partition-2")


@pytest.mark.parametrize(
    "ml_name",
    [
        "t/ns/persistent/x",
        "t/c/ns/persistent/x",
        "public/default/persistent/my+topic%3A1",
        "a-b=c:d.e_f/ns/persistent/x*y.z-1_2",
        "t/ns/persistent/%C3%A9",  # é (NFC)
        "t/ns/persistent/e%CC%81",  # e + combining acute (NFD): another, valid name
        "T/ns/persistent/x",  # ZooKeeper and S3 are case-sensitive: another owner
        "t/ns/persistent/..x",
        "t/ns/persistent/%25",  # a literal '%' in the local name
    ],
)
def test_canonical_managed_ledger_names_are_accepted(ml_name: str) -> None:
    """Every name Pulsar's getPersistenceNamingEncoding can write is accepted as is."""
    assert ml_name == managed_ledger_path(ml_name).removeprefix("/managed-ledgers/")


@pytest.mark.parametrize(
    "ml_name",
    [
        "t/ns/./persistent/x",
        "t/../t/persistent/x",
        "./ns/persistent/x",
        "t/ns/persistent/.",
        "t/ns/persistent/..",
        "t/ns/persistent/x/",
        "t//ns/persistent/x",
        "/t/ns/persistent/x",
        "t/ns/persistent/x/../y",
        "t/ns/persistent/%2E%2E",
        "t/ns/persistent/%2e",
        "t/ns/persistent/a%2Fb",
        "t/ns/persistent/a%2fb",
        "t/ns/persistent/a%5Cb",
        "t/ns/persistent/a%00b",
        "t/ns/persistent/a\x00b",
        "t/ns/persistent/a%0Ab",
        "t/ns/persistent/%C2%85",  # C1 control (NEL)
        "t/ns/persistent/%c3%a9",  # lowercase escapes: not what URLEncoder writes
        "t/ns/persistent/%41",  # an escape of a character the encoder keeps
        "t/ns/persistent/a%20b",  # space is '+'
        "t/ns/persistent/a b",
        "t/ns/persistent/%C3",  # not UTF-8
        "t/ns/persistent/%zz",
        "t/ns/non-persistent/x",
        "t/ns/PERSISTENT/x",
        "té/ns/persistent/x",  # Java's \\w is ASCII only
        "t/ns\x00/persistent/x",
        "t/ns/persistent/",
        "t/ns/persistent/" + "x" * 2049,
        "t" * 256 + "/ns/persistent/x",
    ],
)
def test_non_canonical_managed_ledger_names_are_rejected(ml_name: str) -> None:
    """Dot, empty and extra segments, escapes of separators, dots or controls, and any other
    encoding than URLEncoder's are rejected, naming the field; nothing is normalised."""
    with pytest.raises(InvalidArgument) as err:
        managed_ledger_path(ml_name)
    assert err.value.field == "ml_name"


@pytest.mark.parametrize(
    ("cursor", "accepted"),
    [
        ("my-sub", True),
        ("my+sub%3A1", True),
        ("pulsar.repl.east:1", True),  # replicator cursors are opened unencoded
        ("__compaction", True),
        (".", False),
        ("..", False),
        ("a/b", False),
        ("a%2Fb", False),
        ("%2E%2E", False),
        ("a%00", False),
        ("my sub", False),
        ("", False),
    ],
)
def test_cursor_names(cursor: str, accepted: bool) -> None:
    """Cursor znode names are encoded subscriptions or replicator names, nothing else."""
    expected = None if accepted else "cursor_name"
    assert expected == _rejected_field(lambda: cursor_path("t/ns/persistent/x", cursor))


@pytest.mark.parametrize(
    ("schema_id", "accepted"),
    [
        ("t/ns/my+topic", True),
        ("t/c/ns/x", True),
        ("t/ns/x-partition-01", True),  # not a partition for Pulsar (leading zero)
        ("t/ns/x-partition-3", False),  # getSchemaName strips the partition suffix
        ("t/ns/..", False),
        ("t/./x", False),
        ("t/ns/x/", False),
        ("t/ns/%2E", False),
        ("t/ns/a%2Fb", False),
        ("t/ns/x/y/z", False),
        ("t//x", False),
    ],
)
def test_schema_ids(schema_id: str, accepted: bool) -> None:
    """Schema ids are canonical `tenant/ns/<encoded base topic>` (or V1 with a cluster)."""
    expected = None if accepted else "schema_id"
    assert expected == _rejected_field(lambda: schema_path(schema_id))


def _rejected_field(call: Callable[[], object]) -> str | None:
    """The field an `InvalidArgument` names, or None when the call succeeds."""
    try:
        call()
    except InvalidArgument as err:
        return err.field
    return None
