"""Fault injection: tests can break sends, dispatch and connections of a running broker."""

from __future__ import annotations

import threading

import pulsar
import pytest

from devstack.pulsar import BrokerAdminError, PulsarBrokerProcess

from .conftest import assert_nothing_more, receive_all


def test_failed_send_is_retried_by_the_client_and_stored_once(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """A SEND answered with PersistenceError is resent after the reconnect, stored once."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="retrying")
    broker.control.fail_sends(1)
    producer.send(b"once")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"once"]
    assert_nothing_more(consumer)


def test_delayed_sends_keep_receipt_order(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """With a send delay, every send still succeeds and ids follow the send order."""
    producer = client.create_producer(topic)
    broker.control.delay_sends(0.05)
    results: list[tuple[pulsar.Result, int]] = []
    done = threading.Event()

    def on_sent(result: pulsar.Result, message_id: pulsar.MessageId) -> None:
        results.append((result, message_id.entry_id()))
        if len(results) == 5:
            done.set()

    for i in range(5):
        producer.send_async(f"m{i}".encode(), on_sent)
    assert done.wait(20)
    assert [(pulsar.Result.Ok, i) for i in range(5)] == results


def test_paused_dispatch_holds_messages_until_resumed(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """While dispatch is paused nothing is delivered; after resuming everything is."""
    consumer = client.subscribe(topic, "sub")
    broker.control.pause_dispatch()
    client.create_producer(topic).send(b"held")
    assert_nothing_more(consumer)
    broker.control.resume_dispatch()
    assert [m.data() for m in receive_all(consumer, 1)] == [b"held"]


def test_refused_producer_is_retried_by_the_client(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """A PRODUCER answered with a retryable error succeeds on the client's retry."""
    broker.control.refuse_producers(1)
    producer = client.create_producer(topic)
    assert producer.is_connected()


def test_unload_makes_clients_reconnect(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """A broker-initiated close of a topic's clients is followed by their reconnection."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"before")
    broker.control.unload(topic)
    producer.send(b"after")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"before", b"after"]


def test_unknown_fault_is_an_error(broker: PulsarBrokerProcess) -> None:
    """Asking for a fault the broker does not know fails with 404."""
    with pytest.raises(BrokerAdminError) as caught:
        broker.control._call("POST", "/admin/devstack/faults/meteor")
    assert caught.value.status == 404


def test_in_process_restart_closes_clients_which_reconnect(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """After an in-process restart (memory mode: topics are gone) clients reconnect and work."""
    # Earliest: the re-created subscription must not miss a send that reconnects first.
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    broker.control.restart()
    producer.send(b"after-restart")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"after-restart"]


def test_refused_send_fails_only_that_message(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """A refused send raises in the application; the next one is stored normally."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    broker.control.refuse_sends(1)
    with pytest.raises(pulsar.ChecksumError):
        producer.send(b"refused")
    producer.send(b"accepted")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"accepted"]
    assert_nothing_more(consumer)
