"""`delete_many` on Oxia: the port's `NotEmpty` check for many keys at once, then their
conditional deletes in one write request per shard.

A delete must fail `NotEmpty` while its key has children, as ZooKeeper and Pulsar's
`OxiaMetadataStore.storeDelete` refuse it; Oxia itself deletes any key, so the adapter
lists the children first. One key's check is a list on every shard; here the keys of one
parent share one list per shard (`_children.sibling_ranges`), and the keys found without
children are deleted in one request per shard (Oxia applies a request's deletes in order,
each with a status of its own). For the deleter's batches of ledger keys, a few calls per
batch take the place of four per ledger.

The check and the delete are two requests, as in `delete` and in Pulsar's store: a child
created between them is not seen (ledger keys never get children). A check with no answer
leaves its keys unknown and none of them is deleted; a write with no answer leaves its keys
unknown (`StoreUnavailable`): never success, never absence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from services.metadata.errors import MetadataError, NotEmpty, StoreUnavailable, VersionConflict
from services.metadata.oxia import _client
from services.metadata.oxia._calls import Caller
from services.metadata.oxia._children import SiblingRange, sibling_ranges
from services.metadata.store import ANY_VERSION

DELETES_PER_REQUEST = 1000
"""Most deletes in one write request (far below gRPC's message size)."""

Outcome = MetadataError | None
"""None when this call deleted the key, else why not (as `MetadataStore.delete_many`)."""


class ManyDeletes:
    """The adapter's `delete_many`, on its client and its calls."""

    def __init__(
        self,
        client: Any,
        calls: Caller,
        *,
        check_path: Callable[[str], None],
        refine: Callable[[VersionConflict], Awaitable[MetadataError]],
    ) -> None:
        """`refine` turns a version conflict into `NoNode` when the key is gone (Oxia
        checks the version before it looks for the key)."""
        self._client = client
        self._calls = calls
        self._check_path = check_path
        self._refine = refine

    async def delete(self, items: Sequence[tuple[str, int]]) -> list[Outcome]:
        outcomes: list[Outcome] = [None] * len(items)
        valid = []
        for index, (path, _version) in enumerate(items):
            try:
                self._check_path(path)
            except MetadataError as e:
                outcomes[index] = e
            else:
                valid.append(index)
        checked = await self._children_of_many([items[i][0] for i in valid])
        by_shard: dict[int, list[int]] = {}
        for index in valid:
            path = items[index][0]
            found = checked[path]
            if found is False:
                by_shard.setdefault(_client.shard_of(self._client, path), []).append(index)
            else:
                outcomes[index] = NotEmpty(path) if found is True else found
        written = await asyncio.gather(
            *(self._delete_on_shard(s, [items[i] for i in ix]) for s, ix in by_shard.items())
        )
        for indices, results in zip(by_shard.values(), written, strict=True):
            for index, result in zip(indices, results, strict=True):
                outcomes[index] = result
        return outcomes

    async def _children_of_many(self, paths: Sequence[str]) -> dict[str, bool | MetadataError]:
        """Per path, whether it has children, or the error that left it unknown."""
        ranges = sibling_ranges(paths)
        listed = await asyncio.gather(*(self._list_range(r) for r in ranges))
        found: dict[str, bool | MetadataError] = {}
        for siblings, keys in zip(ranges, listed, strict=True):
            if isinstance(keys, MetadataError):
                found.update((p, _about(keys, p, "the children check")) for p in siblings.members)
                continue
            parents = siblings.with_children(keys)
            found.update((path, path in parents) for path in siblings.members)
        return found

    async def _list_range(self, siblings: SiblingRange) -> list[str] | MetadataError:
        try:
            keys: list[str] = await self._calls.call(
                min(siblings.members), self._client.list, siblings.start, siblings.end
            )
        except MetadataError as e:
            return e
        return keys

    async def _delete_on_shard(self, shard: int, items: Sequence[tuple[str, int]]) -> list[Outcome]:
        """Conditional deletes of keys of one shard, in requests of `DELETES_PER_REQUEST`."""
        outcomes: list[Outcome] = []
        for start in range(0, len(items), DELETES_PER_REQUEST):
            chunk = items[start : start + DELETES_PER_REQUEST]
            deletes = [(p, None if v == ANY_VERSION else v) for p, v in chunk]
            try:
                answers = await self._calls.call(
                    chunk[0][0], _client.delete_in_one_request, self._client, shard, deletes
                )
            except MetadataError as e:
                outcomes.extend(_about(e, path, "the delete") for path, _v in chunk)
                continue
            for (path, version), answer in zip(chunk, answers, strict=True):
                outcomes.append(await self._outcome(path, version, answer))
        return outcomes

    async def _outcome(self, path: str, version: int, answer: Exception | None) -> Outcome:
        if answer is None:
            return None
        error = self._calls.mapped(answer, path, lambda: VersionConflict(path, version))
        if isinstance(error, VersionConflict):
            return await self._refine(error)
        return error


def _about(error: MetadataError, path: str, what: str) -> MetadataError:
    """`error` of a request about several paths (`what` it was) as the outcome of `path`."""
    if isinstance(error, StoreUnavailable):
        return StoreUnavailable(path, f"{what} got no answer: {error.reason}")
    return MetadataError(path, f"{what} failed: {error}")
