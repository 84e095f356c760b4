"""ClusterSpec validation: bad knobs are refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.simulator.spec import ClusterSpec, OffloadDriver, OrphanPlan
from services.core.errors import InvalidArgument


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tenants", 0),
        ("ledgers_per_topic", (3, 2)),
        ("ledgers_per_topic", (0, 2)),
        ("partitions", (0, 2)),
        ("schema_versions", (0, 1)),
        ("offloaded_share", 1.5),
        ("v2_share", -0.1),
        ("ensemble_size", 4),
        ("cluster_name", ""),
        ("ledgers_root", "ledgers"),
        ("compression_threshold", -1),
    ],
)
def test_bad_values_are_refused_naming_the_field(field: str, value: Any) -> None:
    """Each invalid knob raises InvalidArgument for that field."""
    with pytest.raises(InvalidArgument) as info:
        ClusterSpec(**{field: value})
    assert field == info.value.field


def test_object_orphans_need_the_s3_driver() -> None:
    """Filesystem offloads write no objects, so object orphans cannot be asked for."""
    with pytest.raises(InvalidArgument) as info:
        ClusterSpec(offload_driver=OffloadDriver.FILESYSTEM, orphans=OrphanPlan.some())
    assert info.value.field == "orphans"


def test_some_plants_every_kind() -> None:
    """OrphanPlan.some(n) asks for n of each of the ten kinds."""
    plan = OrphanPlan.some(2)
    assert list(vars(plan).values()) == [2] * 10
    assert plan.total() == 20
