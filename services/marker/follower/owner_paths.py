"""Which owner a znode below `/managed-ledgers` or `/schemas` is, from its path alone.

- `/managed-ledgers/<t>/<ns>/persistent/<topic>`: a managed ledger (V2 name);
  `/managed-ledgers/<t>/<cluster>/<ns>/persistent/<topic>`: a V1 name;
- one more segment below a managed ledger: a cursor (`ManagedCursorImpl` stores each cursor
  as a child of its ML's znode);
- `/schemas/<t>/<ns>/<topic>` (V1: `/schemas/<t>/<cluster>/<ns>/<topic>`): a schema locator.

Tenant, namespace and domain znodes, and anything else, are not owners (None). Names must be
canonical (`services.metadata.pulsar_names`): a path that is not is no owner of ours, so a
PDLI never names an alias.
"""

from __future__ import annotations

import enum
import functools
from typing import NamedTuple

from services.core.errors import InvalidArgument
from services.marker.owners import Owner, resolve_owner
from services.metadata.pulsar_names import MANAGED_LEDGERS_ROOT, PERSISTENT, SCHEMAS_ROOT
from tombstone.v1 import pending_delete_pb2 as _pd

_ML_PREFIX = MANAGED_LEDGERS_ROOT + "/"
_SCHEMA_PREFIX = SCHEMAS_ROOT + "/"
ROOTS = (MANAGED_LEDGERS_ROOT, SCHEMAS_ROOT)


class Kind(enum.IntEnum):
    """An owner's kind; its value is stored in the index and the checkpoint."""

    ML = 0
    CURSOR = 1
    SCHEMA = 2


COMPONENTS = {
    Kind.ML: _pd.MANAGED_LEDGER,
    Kind.CURSOR: _pd.MANAGED_CURSOR,
    Kind.SCHEMA: _pd.SCHEMA_STORAGE,
}


class OwnerPath(NamedTuple):
    kind: Kind
    owner: Owner


def classify(path: str) -> OwnerPath | None:
    """The owner stored at `path` (relative to the chroot), or None."""
    if path.startswith(_ML_PREFIX):
        return _managed(path[len(_ML_PREFIX) :])
    if path.startswith(_SCHEMA_PREFIX):
        return _schema(path[len(_SCHEMA_PREFIX) :])
    return None


@functools.lru_cache(maxsize=65536)
def _managed(rest: str) -> OwnerPath | None:
    parts = rest.split("/")
    try:
        if len(parts) == 4 and parts[2] == PERSISTENT:
            return OwnerPath(Kind.ML, _owner(_pd.MANAGED_LEDGER, rest))
        if len(parts) == 5 and parts[2] == PERSISTENT:
            return OwnerPath(Kind.CURSOR, _owner(_pd.MANAGED_CURSOR, "/".join(parts[:4]), parts[4]))
        if len(parts) == 5 and parts[3] == PERSISTENT:
            return OwnerPath(Kind.ML, _owner(_pd.MANAGED_LEDGER, rest))
        if len(parts) == 6 and parts[3] == PERSISTENT:
            return OwnerPath(Kind.CURSOR, _owner(_pd.MANAGED_CURSOR, "/".join(parts[:5]), parts[5]))
    except InvalidArgument:
        return None
    return None


@functools.lru_cache(maxsize=65536)
def _schema(rest: str) -> OwnerPath | None:
    if rest.count("/") not in (2, 3):
        return None
    try:
        owner = resolve_owner(
            _pd.SCHEMA_STORAGE, topic_name="", ml_name="", cursor_name="", schema_id=rest
        )
    except InvalidArgument:
        return None
    return OwnerPath(Kind.SCHEMA, owner)


def _owner(component: int, ml_name: str, cursor_name: str = "") -> Owner:
    return resolve_owner(
        component, topic_name="", ml_name=ml_name, cursor_name=cursor_name, schema_id=""
    )
