"""A namespace deleted whole during the run, in Pulsar's order.

`NamespacesBase.internalDeleteNamespace` deletes every topic of the namespace (each as a
topic deletion: through the marker for a PIP-186 broker, the broker's own deletes for an
unmodified one), and only once they are all gone its policies znode
(`/admin/policies/<tenant>/<ns>`); a topic that cannot be deleted stops it, and the policies
stay. In half the runs, the namespace `public/temp` has one topic, trimmed a few times, then
deleted with its namespace at a drawn moment.

What it stages: PDLIs still in flight (retries, the follower's OBSERVED intents for what the
broker failed to delete) when the policies are gone. Their owner is absent and its namespace
unknown here, which the verifier cannot tell from a neighbour's namespace nobody declared: it
dead-letters them (SKIP FOREIGN `namespace_unknown`) unless the operator names the namespace
as deleted. That is L1's "in the DLQ with a reason an operator can act on"; the run's L1 check
counts any dead letter carrying a reason code.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

from services.metadata.namespaces import encode_policies, policies_path
from sim.pulsar import CLUSTER

if TYPE_CHECKING:
    from sim.state import TopicState
    from sim.view import WorldView

TEMP_NAMESPACE = "public/temp"
SHARE = 0.5
"""Of the runs, the share with a namespace deleted during the run."""


class DeletedNamespace:
    def __init__(self, world: WorldView, seed: int) -> None:
        self.world = world
        self.rng = random.Random(seed * 7717 + 11)
        self.topic: TopicState | None = None

    def setup(self) -> None:
        """The namespace's policies, then its topic (as Pulsar: the namespace first)."""
        from sim.state import TopicState

        if self.rng.random() >= SHARE:
            return
        w = self.world
        w.zk.create(policies_path(TEMP_NAMESPACE), encode_policies([CLUSTER]))
        unmodified = self.rng.random() < 0.5
        self.topic = TopicState(f"{TEMP_NAMESPACE}/persistent/x", "sub", 0, unmodified)
        w.create_topic(self.topic, self.rng)

    async def run(self) -> None:
        t, w = self.topic, self.world
        if t is None:
            return
        for _ in range(self.rng.randint(0, 2)):
            await asyncio.sleep(self.rng.uniform(0.0, 8.0))
            async with t.lock:
                await (w.unmodified.trim(t) if t.unmodified else w.trim(t))
        await asyncio.sleep(self.rng.uniform(0.0, 10.0))
        async with t.lock:
            w.sched.log(f"broker-{t.broker} deletes namespace {TEMP_NAMESPACE}")
            if t.unmodified:
                deleted = await w.unmodified.delete_topic(t, recreate=False)
            else:
                deleted = await w.delete_topic(t, recreate=False)
            if not deleted:
                w.sched.log(f"namespace {TEMP_NAMESPACE} not deleted: a topic is left")
                return
            path = policies_path(TEMP_NAMESPACE)
            w.zk.delete(path, version=-1, by="pulsar")
            w.sched.log(f"namespace {TEMP_NAMESPACE} deleted (topics, then {path})")
