"""The deleter's BookKeeper figure on Oxia (`deleter --metadata oxia`): rounds that alternate
the raw `oxia` client and the deleter on the same server, each round on ledgers of its own,
and the CPU each process spent per ledger in each phase.

The ratio is the median of the rounds' ratios (each pair measured back to back, first one
side then the other, the order swapped every round). The CPU figures say what bounds it: on
two shared cores the side that spends more CPU per ledger in total is the slower one, and
the server's share says how much of that is store calls.
"""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from benchmarks._deleter_stack import (
    Metadata,
    OxiaMetadata,
    deleter_child,
    encode,
    metric,
    pdli,
    publish,
    rate_until,
    write_ledgers,
)
from benchmarks._oxia import in_threads, raw_client
from benchmarks._pool import ratio
from benchmarks._proc import cpu_seconds
from benchmarks._truth import UndoneWork, require
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from services.metadata import LedgerPaths
from services.metadata.oxia.limits import DEFAULT_MAX_THREADS


class _Parts(Protocol):
    """`benchmarks.deleter.Parts` on Oxia (that module runs this one)."""

    @property
    def zk(self) -> Metadata: ...
    @property
    def s3(self) -> S3Server: ...
    @property
    def broker(self) -> PulsarBrokerProcess: ...
    @property
    def verifier(self) -> str: ...
    @property
    def workdir(self) -> Path: ...


@dataclass
class Round:
    """One round: each side's rate and the CPU milliseconds per ledger of each process."""

    order: str
    rates: dict[str, float] = field(default_factory=dict)
    cpu_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    load: str = ""


def oxia_server_pid() -> int:
    """The devstack Oxia server this process started (`benchmarks._oxia.oxia_server`)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"devstack.oxia" in command:
            return int(entry.name)
    raise RuntimeError("no devstack Oxia server among this process's children")


class CpuMeter:
    """CPU seconds of named processes between `start()` and `per_ledger(n)`."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self._pids = dict(pids)
        self._start: dict[str, float] = {}

    def adding(self, name: str, pid: int) -> CpuMeter:
        return CpuMeter({**self._pids, name: pid})

    def start(self) -> None:
        self._start = {name: cpu_seconds(pid) for name, pid in self._pids.items()}

    def per_ledger(self, n: int) -> dict[str, float]:
        spent = {name: cpu_seconds(pid) - self._start[name] for name, pid in self._pids.items()}
        return {name: 1000 * seconds / n for name, seconds in spent.items()}


async def raw_oxia(address: str, ids: range, meter: CpuMeter) -> tuple[float, dict[str, float]]:
    """The raw oxia client: get each ledger key (value + version), delete it at that version
    (`expected_version_id`), from as many threads as the adapter's pool."""
    paths = LedgerPaths()

    def get_and_delete(ledger_id: int) -> None:
        path = paths.ledger_path(ledger_id)
        _key, _value, version = raw.get(path)
        require(raw.delete(path, expected_version_id=version.version_id()), f"raw delete {path}")

    with raw_client(address) as raw:
        meter.start()
        rate = await in_threads(list(ids), DEFAULT_MAX_THREADS, get_and_delete)
        return rate, meter.per_ledger(len(ids))


async def deleter_round(
    parts: _Parts, ids: range, name: str, meter: CpuMeter
) -> tuple[float, dict[str, float]]:
    """One deleter child over the PDLIs of `ids`: acknowledged per second from its first
    acknowledgement, every one a deletion."""
    await publish(parts.broker, encode(pdli(i) for i in ids))
    log = parts.workdir / f"{name}.log"
    child, port = deleter_child(parts.zk, parts.s3, parts.broker, parts.verifier, log)
    await child.start()
    try:
        assert child.pid is not None
        meter = meter.adding("deleter", child.pid)
        meter.start()
        rate = await rate_until(port, len(ids), timeout=600)
        cpu = meter.per_ledger(len(ids))
        dead = await asyncio.to_thread(metric, port, "tombstone_deleter_dead_lettered_total")
        deleted = await asyncio.to_thread(metric, port, "tombstone_deleter_deleted_total")
        if dead or deleted < len(ids):
            raise UndoneWork(
                f"the {name} run deleted {deleted:.0f} of {len(ids)} and dead-lettered "
                f"{dead:.0f} (see {child.log})"
            )
        return rate, cpu
    finally:
        await child.stop()


def still_there(address: str, ids: range) -> int:
    """How many of these ledger keys are still on the server (one list per directory)."""
    paths = LedgerPaths()
    wanted = {paths.ledger_path(i) for i in ids}
    directories = {path.rsplit("/", 1)[0] for path in wanted}
    with raw_client(address) as raw:
        found = {key for d in directories for key in raw.list(d + "/", d + "//")}
    return len(found & wanted)


async def oxia_rounds(parts: _Parts, n: int, rounds: int, verifier_pid: int) -> list[Round]:
    """`rounds` rounds of `n` ledgers a side, raw first in even rounds, the deleter first
    in odd ones."""
    pids = {"verifier": verifier_pid, "oxia server": oxia_server_pid()}
    if parts.broker.pid is not None:
        pids["broker"] = parts.broker.pid
    pids["benchmark (raw client)"] = os.getpid()
    meter = CpuMeter(pids)
    assert isinstance(parts.zk, OxiaMetadata)
    address = parts.zk.address
    done = []
    for number, (mine, raws) in enumerate(_ledger_ids(n, rounds)):
        await write_ledgers(parts.zk, range(mine.start, raws.stop))
        one = Round(order="raw, deleter" if number % 2 == 0 else "deleter, raw")
        for side in one.order.split(", "):
            if side == "raw":
                one.rates["raw"], one.cpu_ms["raw"] = await raw_oxia(address, raws, meter)
            else:
                name = f"bookkeeper-oxia-{number}"
                one.rates["deleter"], one.cpu_ms["deleter"] = await deleter_round(
                    parts, mine, name, meter
                )
        left = await asyncio.to_thread(still_there, address, mine)
        if left:
            raise UndoneWork(f"{left} of the {n} ledger keys the deleter had are still there")
        one.load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"round {number + 1}: {_round_line(one)}")
        done.append(one)
    return done


def _ledger_ids(n: int, rounds: int) -> Iterator[tuple[range, range]]:
    for number in range(rounds):
        base = number * 2 * n
        yield range(base + 1, base + n + 1), range(base + n + 1, base + 2 * n + 1)


def _round_line(one: Round) -> str:
    deleter, raw = one.rates["deleter"], one.rates["raw"]
    return (
        f"deleter {deleter:.0f} ledgers/s, raw {raw:.0f} ledgers/s, {deleter / raw:.0%} "
        f"({one.order}); load average {one.load}"
    )


def report(rounds: list[Round], n: int, shards: int) -> None:
    """The ratio first: absolute rates are those of the devstack server (Python)."""
    rates = {side: [one.rates[side] for one in rounds] for side in ("deleter", "raw")}
    print()
    print(
        f"deleter / raw oxia get + versioned delete: {ratio(rates, 'deleter', 'raw'):.0%} "
        f"(median of {len(rounds)} rounds of {n} ledgers a side, {shards} shards)"
    )
    for number, one in enumerate(rounds, 1):
        print(f"  round {number}: {_round_line(one)}")
    print("CPU ms per ledger (median of rounds):")
    print("| process | deleter phase | raw phase |")
    print("| --- | --- | --- |")
    names = list(rounds[0].cpu_ms["deleter"])
    for name in names:
        cells = []
        for side in ("deleter", "raw"):
            values = [one.cpu_ms[side][name] for one in rounds if name in one.cpu_ms[side]]
            cells.append(f"{statistics.median(values):.2f}" if values else "")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    totals = {
        side: statistics.median(sum(one.cpu_ms[side].values()) for one in rounds)
        for side in ("deleter", "raw")
    }
    print(f"| all | {totals['deleter']:.2f} | {totals['raw']:.2f} |")
