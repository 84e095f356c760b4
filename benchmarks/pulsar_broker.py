"""Throughput of the devstack broker with the real `pulsar-client` (one client process).

Run: .venv/bin/python -m benchmarks.pulsar_broker [--messages N] [--unbatched N] [--smoke]

The broker runs in a child process (in memory); the client runs here. Six figures:
batched produce, consume+ack of those messages, then the same without batching (one message
per SEND, as delayed messages always are), then batched produce with no per-message
callback (one flush per 1,000 messages, as `services.systopic` sends) and the consume+ack
that proves every message was stored. Every loop is bounded by a count and a deadline.

Beside each wall-clock rate it prints the CPU seconds the broker and the client used, and
messages per broker CPU second: on a shared 2-core machine the wall-clock rate depends on
what else runs, the broker's cost per message does not.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from collections.abc import Callable

import pulsar

from benchmarks._proc import cpu_seconds
from benchmarks._truth import UndoneWork, parse
from benchmarks._truth import run as run_checked
from devstack.pulsar import PulsarBrokerProcess

DEADLINE_SECONDS = 120.0
Figures = tuple[float, float, float]


def produce(client: pulsar.Client, topic: str, count: int, *, batching: bool) -> float:
    """Send `count` messages asynchronously; messages per second until the last receipt."""
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=10,
        max_pending_messages=50_000,
        block_if_queue_full=True,
    )
    done = threading.Event()
    failures: list[pulsar.Result] = []
    acked = 0

    def on_sent(result: pulsar.Result, _id: object) -> None:
        # Receipts are handled on the client's one I/O thread: no lock needed.
        nonlocal acked
        acked += 1
        if result != pulsar.Result.Ok:
            failures.append(result)
        if acked == count:
            done.set()

    payload = b"x" * 100
    start = time.perf_counter()
    for _ in range(count):
        producer.send_async(payload, on_sent)
    producer.flush()
    if not done.wait(DEADLINE_SECONDS):
        raise UndoneWork(f"only {acked} of {count} receipts")
    elapsed = time.perf_counter() - start
    if failures:
        raise UndoneWork(f"{len(failures)} sends failed: {failures[0]}")
    producer.close()
    return count / elapsed


def produce_flushed(client: pulsar.Client, topic: str, count: int) -> float:
    """Send `count` batched messages with no per-message callback, flushing every 1,000:
    the client's cost without the GIL hand-off each receipt callback costs."""
    import _pulsar

    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=1001,
        batching_max_publish_delay_ms=1000,
        max_pending_messages=50_000,
        block_if_queue_full=True,
    )
    send = producer._producer.send_async
    payload = b"x" * 100
    start = time.perf_counter()
    for sent in range(1, count + 1):
        send(_pulsar.MessageBuilder().content(payload).build(), None)
        if sent % 1000 == 0 or sent == count:
            producer.flush()  # raises if the batch was not stored
    elapsed = time.perf_counter() - start
    producer.close()
    return count / elapsed


def consume(consumer: pulsar.Consumer, count: int) -> float:
    """Receive and acknowledge `count` messages; messages per second."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    start = time.perf_counter()
    for received in range(count):
        if time.monotonic() > deadline:
            raise UndoneWork(f"only {received} of {count} messages")
        try:
            message = consumer.receive(timeout_millis=10_000)
        except pulsar.Timeout:
            raise UndoneWork(f"only {received} of {count} messages within 10 s") from None
        consumer.acknowledge(message)
    return count / (time.perf_counter() - start)


def _client_cpu() -> float:
    times = os.times()
    return times.user + times.system


def measure(broker_pid: int, step: Callable[[], float]) -> tuple[float, float, float]:
    """(msg/s, broker CPU s, client CPU s) of one step."""
    broker_before, client_before = cpu_seconds(broker_pid), _client_cpu()
    rate = step()
    return rate, cpu_seconds(broker_pid) - broker_before, _client_cpu() - client_before


def run(
    client: pulsar.Client, broker_pid: int, count: int, *, batching: bool, flushed: bool = False
) -> list[Figures]:
    topic = f"persistent://public/default/bench-{uuid.uuid4().hex[:8]}"
    # The durable subscription exists before the first message, as on Pulsar a topic with
    # neither a subscription nor retention may trim what it stores at once; its consumer is
    # closed (the subscription stays) so that producing and consuming do not compete.
    client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest).close()
    if flushed:
        produced = measure(broker_pid, lambda: produce_flushed(client, topic, count))
    else:
        produced = measure(broker_pid, lambda: produce(client, topic, count, batching=batching))
    # Consumed afterwards, from the subscription's backlog.
    consumer = client.subscribe(
        topic, "bench", initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=5000
    )
    consumed = measure(broker_pid, lambda: consume(consumer, count))
    consumer.close()
    return [produced, consumed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000, help="batched run size")
    parser.add_argument("--unbatched", type=int, default=20_000, help="unbatched run size")
    args = parse(parser, {"messages": 2000, "unbatched": 200})
    load = os.getloadavg()
    with PulsarBrokerProcess() as broker:
        assert broker.pid is not None
        client = pulsar.Client(broker.service_url, io_threads=1)
        try:
            batched = run(client, broker.pid, args.messages, batching=True)
            unbatched = run(client, broker.pid, args.unbatched, batching=False)
            flushed = run(client, broker.pid, args.messages, batching=True, flushed=True)
        finally:
            client.close()
    print(f"load average before: {load[0]:.1f} (2 cores; other work competes for them)")
    names = [
        "batched produce",
        "batched consume+ack",
        "unbatched produce",
        "unbatched consume+ack",
        "batched, no callback",
        "its consume+ack",
    ]
    sizes = [args.messages] * 2 + [args.unbatched] * 2 + [args.messages] * 2
    for name, size, (rate, broker_cpu, client_cpu) in zip(
        names, sizes, batched + unbatched + flushed, strict=True
    ):
        broker_rate = size / broker_cpu if broker_cpu else float("inf")
        client_rate = size / client_cpu if client_cpu else float("inf")
        print(
            f"{name:<22}: {rate:>9,.0f} msg/s | broker CPU {broker_cpu:5.2f} s "
            f"= {broker_rate:>10,.0f} msg/CPU-s | client CPU {client_cpu:5.2f} s "
            f"= {client_rate:>9,.0f} msg/CPU-s"
        )


if __name__ == "__main__":
    run_checked(main)
