"""ZooKeeper's ACLs are checked and set only where Tombstone's znodes are in ZooKeeper: on
another store (Oxia) the start-up check is skipped with a log line saying why, and
`tombstone zookeeper secure` refuses."""

from __future__ import annotations

from typing import cast

from click.testing import CliRunner
from structlog.testing import capture_logs

from services.core.zk_security import ZooKeeperSecurity
from services.metadata.secure_cli import EXIT_REFUSED, zookeeper
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.secure import refuse_unsecured_if_zookeeper


class _OtherStore:
    """Stands in at the port for a store that is not ZooKeeper: the check must touch nothing
    of it (any call would fail, for it has no methods)."""


async def test_the_acl_check_is_skipped_and_logged_on_another_store() -> None:
    """A digest user is configured, but the store is not ZooKeeper: nothing is read, and the
    skip is logged with its reason."""
    security = ZooKeeperSecurity(digest_user="tombstone", digest_password="secret")
    with capture_logs() as logs:
        await refuse_unsecured_if_zookeeper(cast(MetadataStore, _OtherStore()), security)
    [skipped] = [log for log in logs if log["event"] == "acl_check_skipped"]
    assert skipped["store"] == "_OtherStore"
    assert "not configured by Tombstone" in skipped["reason"]


def test_secure_refuses_a_pulsar_store_that_is_not_zookeeper() -> None:
    """`tombstone zookeeper secure` with Pulsar's store on Oxia: exit 2, naming the setting,
    before any connection."""
    env = {
        "TOMBSTONE_METADATA_STORE_URL": "oxia://oxia:6648/broker",
        "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER": "tombstone",
        "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD": "secret",
    }
    result = CliRunner().invoke(zookeeper, ["secure", "--check"], env=env)
    assert result.exit_code == EXIT_REFUSED
    assert "TOMBSTONE_METADATA_STORE_URL names oxia://oxia:6648/broker" in result.stderr
