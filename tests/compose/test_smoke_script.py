"""compose/smoke.sh: shellcheck-clean, its helpers tested in plain bash, and its whole run
replayed against a stand-in for the user's `docker` command.

The stand-in (`tests/compose/smoke/fake_docker`) only replays what `docker compose ...` would
print; the script's own parsing, set comparisons, waits and exit status are what is tested.
The recorded outputs follow the real tools' formats: `pulsar-admin topics stats-internal`
prints `ManagedLedgerInternalStats` (ledgers with `ledgerId`/`offloaded`, cursors with
`cursorLedger`) through Jackson's pretty printer; `zookeeper-shell ls -R` is ZooKeeperMain's
one path per line (the devstack test feeds it real output); `bookkeeper shell listledgers`
is ListLedgersCommand's `ledgerID: <id>` lines; `mc ls --recursive` ends each line with the
key; `tombstone deleter status --json` is GetStatusResponse with every field.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.compose.stack_files import ROOT, oxia_compose

SMOKE = ROOT / "compose" / "smoke.sh"
HERE = Path(__file__).parent / "smoke"
HELPER_TESTS = HERE / "helpers_test.sh"
FAKE_DOCKER = HERE / "fake_docker"
TOPIC_RE = r"persistent://public/tombstone-smoke/smoke-[0-9]+"


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    assert found, "shellcheck is missing: scripts/bootstrap.sh installs it (Debian package)"
    return found


@pytest.mark.parametrize("script", [SMOKE, HELPER_TESTS, FAKE_DOCKER], ids=lambda p: p.name)
def test_shellcheck_clean(script: Path) -> None:
    """shellcheck reports nothing (sourced files followed)."""
    result = subprocess.run(
        [_shellcheck(), "-x", script.name],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")


def _helper_tests() -> list[str]:
    return re.findall(r"^(test_\w+)\(\)", HELPER_TESTS.read_text(encoding="utf-8"), re.M)


@pytest.mark.parametrize("name", _helper_tests())
def test_helper(name: str) -> None:
    """Each bash test of the pure helpers passes."""
    result = subprocess.run(
        ["bash", str(HELPER_TESTS), name], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


# --- The whole run against recorded outputs -------------------------------------------------

SERVICES = [
    "zookeeper", "bookie", "broker", "minio", "verifier", "marker", "deleter", "prometheus",
    "grafana",
]  # fmt: skip
OXIA_SERVICES = ["oxia-coordinator", "oxia", *SERVICES[1:]]
CURSOR_LEDGER = 20
ZK_LISTING = (
    r"exec -T -e PULSAR_MEM=.* zookeeper bin/pulsar zookeeper-shell -server localhost:2181 "
    r"ls -R /ledgers$"
)
BK_LISTING = r"exec -T -e BOOKIE_MEM=.* bookie bin/bookkeeper shell listledgers$"


def stats_internal(ledgers: list[tuple[int, bool]]) -> str:
    """`topics stats-internal` output (ManagedLedgerInternalStats, Jackson pretty printer)."""
    document = {
        "entriesAddedCounter": 5 * len(ledgers),
        "state": "LedgerOpened",
        "ledgers": [
            {"ledgerId": i, "entries": 5, "size": 290, "offloaded": off, "underReplicated": False}
            for i, off in ledgers
        ],
        "cursors": {"smoke": {"markDeletePosition": "-1:-1", "cursorLedger": CURSOR_LEDGER}},
    }
    return json.dumps(document, indent=2, separators=(",", " : ")) + "\n"


def zk_listing(ids: list[int]) -> str:
    """ZooKeeperMain's `ls -R /ledgers`: connection lines, then one path per line."""
    lines = ["Connecting to localhost:2181", "", "WATCHER::", "", "/ledgers", "/ledgers/LAYOUT"]
    lines += [f"/ledgers/00/0000/L{i:04d}" for i in ids]
    return "\n".join(lines) + "\n"


def bk_listing(ids: list[int]) -> str:
    """`bookkeeper shell listledgers` (ListLedgersCommand): one `ledgerID: <id>` per ledger,
    after a log line of the shell's start-up."""
    lines = ["INFO  org.apache.bookkeeper.meta.MetadataDrivers - initialized"]
    lines += [f"ledgerID: {i}" for i in ids]
    return "\n".join(lines) + "\n"


def mc_listing(ids: list[int]) -> str:
    """`mc ls --recursive`: both offload objects of each ledger."""
    return "".join(
        f"[2026-11-23 20:02:11 UTC]   412B STANDARD 5f0c8d52-uuid-ledger-{i}{suffix}\n"
        for i in ids
        for suffix in ("", "-index")
    )


class FakeDocker:
    """Rules for tests/compose/smoke/fake_docker in a temporary directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "rules").mkdir(parents=True)
        (root / "bin").mkdir()
        (root / "bin" / "docker").symlink_to(FAKE_DOCKER)
        self._count = 0

    def rule(self, pattern: str, *outputs: str, rc: int = 0) -> None:
        self._count += 1
        base = self.root / "rules" / f"{self._count:02d}"
        base.with_suffix(".match").write_text(pattern + "\n")
        for number, output in enumerate(outputs or ("",), start=1):
            Path(f"{base}.out.{number}").write_text(output)
        if rc:
            base.with_suffix(".rc").write_text(f"{rc}\n")

    def calls(self) -> list[str]:
        return (self.root / "calls.log").read_text().splitlines()

    def run(self, **settings: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            **settings,
            "PATH": f"{self.root / 'bin'}:{os.environ['PATH']}",
            "FAKE_DOCKER_DIR": str(self.root),
            "SMOKE_WAIT": "2",
            "SMOKE_POLL": "0.2",
        }
        return subprocess.run(
            ["bash", str(SMOKE)], env=env, capture_output=True, text=True, timeout=300, check=False
        )


GRAFANA_HEALTH = '{\n  "database": "ok",\n  "version": "12.1.1"\n}\n'
"""Grafana's `/api/health` (pretty-printed JSON)."""


def grafana_search(uids: list[str]) -> str:
    """Grafana's `/api/search` answer: a compact JSON list of dashboard hits."""
    hits = [
        {"id": i, "uid": uid, "title": "Tombstone", "type": "dash-db"} for i, uid in enumerate(uids)
    ]
    return json.dumps(hits, separators=(",", ":"))


def _stack(
    fake: FakeDocker,
    *,
    zk_after_trim: list[int],
    objects_after_trim: list[int],
    dashboards: tuple[str, ...] = ("tombstone",),
    oxia: bool = False,
) -> None:
    """A stack whose topic gets ledgers 10..14; the first four are offloaded; the subscription
    moves to 12:0 and the broker trims 10 and 11. With `oxia`, the Oxia variant's containers,
    and its ledgers listed by `bookkeeper shell listledgers` instead of ZooKeeper's shell."""
    services = OXIA_SERVICES if oxia else SERVICES
    fake.rule(r" ps --format ", "".join(f"{s} running healthy\n" for s in services))
    fake.rule(r"namespaces list public$", "public/default\n")
    fake.rule(r"namespaces (create|set-retention) ")
    fake.rule(rf"topics create {TOPIC_RE}$")
    fake.rule(rf"topics create-subscription -s smoke -m earliest {TOPIC_RE}$")
    fake.rule(r"pulsar-client --url pulsar://localhost:6650 produce ", "5 messages produced\n")
    fake.rule(r"topics unload ")
    all_ledgers = [10, 11, 12, 13, 14]
    before = stats_internal([(i, False) for i in all_ledgers])
    offloaded = stats_internal([(i, i != 14) for i in all_ledgers])
    trimmed = stats_internal([(i, i != 14) for i in (12, 13, 14)])
    fake.rule(r"topics stats-internal ", before, offloaded, offloaded, offloaded, trimmed)
    fake.rule(rf"topics offload -s 0 {TOPIC_RE}$", "Offload triggered\n")
    fake.rule(
        r"topics offload-status ", "Offload is currently running\n", "Offload was a success\n"
    )
    fake.rule(rf"topics reset-cursor -s smoke -m 12:0 -e {TOPIC_RE}$")
    fake.rule(r"topics trim-topic ")
    if oxia:
        fake.rule(BK_LISTING, bk_listing([1, 2, *zk_after_trim]))
    else:
        fake.rule(ZK_LISTING, zk_listing([1, 2, *zk_after_trim]))
    fake.rule(
        r"run --rm --no-deps -T minio-init ",
        mc_listing([10, 11, 12, 13]),
        mc_listing(objects_after_trim),
    )
    fake.rule(
        r"exec -T deleter sh -c ",
        '{\n  "estimated_in_flight": 0,\n  "system_topic_backlog": 0,\n'
        '  "dead_letter_backlog": 0\n}\n',
    )
    fake.rule(r"exec -T grafana sh -c .* http://127.0.0.1:3000/api/health$", GRAFANA_HEALTH)
    fake.rule(
        r"exec -T grafana sh -c .* http://127.0.0.1:3000/api/search\?query=Tombstone$",
        grafana_search(list(dashboards)),
    )


def test_run_passes_when_every_trimmed_ledger_and_object_is_gone(tmp_path: Path) -> None:
    """The broker deleted 10 and 11 from /ledgers and their objects from MinIO; 12..14 and the
    cursor ledger are still there: every step passes, the follower step is a SKIP, exit 0."""
    fake = FakeDocker(tmp_path)
    _stack(fake, zk_after_trim=[12, 13, 14, CURSOR_LEDGER], objects_after_trim=[12, 13])
    result = fake.run()
    steps = [line.split(":")[0] for line in result.stdout.splitlines()]
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert steps == [
        "PASS stack", "PASS namespace", "PASS topic", "PASS rollover", "PASS offload",
        "PASS offload", "PASS trim", "PASS bookkeeper", "PASS bookkeeper", "PASS objects",
        "PASS objects", "PASS tombstone", "PASS grafana", "SKIP follower", "PASS",
    ]  # fmt: skip
    assert "PASS bookkeeper: 2 trimmed ledgers in /ledgers gone (10 11)" in result.stdout
    assert any(re.search(rf"topics offload -s 0 {TOPIC_RE}$", c) for c in fake.calls())


def test_run_fails_on_a_trimmed_ledger_left_in_zookeeper(tmp_path: Path) -> None:
    """Ledger 11 left the topic's list but its znode stays: the bookkeeper step fails with its
    id after the bounded wait, the other steps still report, exit 1."""
    fake = FakeDocker(tmp_path)
    _stack(fake, zk_after_trim=[11, 12, 13, 14, CURSOR_LEDGER], objects_after_trim=[12, 13])
    result = fake.run()
    assert result.returncode == 1
    assert "FAIL bookkeeper: trimmed ledgers in /ledgers still present: 11" in result.stdout
    assert "PASS objects: 2 objects of trimmed offloaded ledgers gone (10 11)" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("FAIL: 1 step(s) failed")


def test_run_fails_when_a_listed_offloaded_ledger_lost_its_objects(tmp_path: Path) -> None:
    """Ledger 13 is still listed as offloaded but its objects are gone from MinIO: the objects
    step fails naming it."""
    fake = FakeDocker(tmp_path)
    _stack(fake, zk_after_trim=[12, 13, 14, CURSOR_LEDGER], objects_after_trim=[12])
    result = fake.run()
    assert result.returncode == 1
    assert "FAIL objects: listed offloaded ledgers with both objects missing: 13" in result.stdout


def test_run_stops_early_when_the_stack_is_not_healthy(tmp_path: Path) -> None:
    """A container not healthy: one FAIL line naming it, nothing else is attempted, exit 1."""
    fake = FakeDocker(tmp_path)
    healthy = "".join(f"{s} running healthy\n" for s in SERVICES if s != "bookie")
    fake.rule(r" ps --format ", healthy + "bookie restarting \n")
    result = fake.run()
    assert (result.returncode, result.stdout.splitlines()[0]) == (
        1,
        "FAIL stack: not running and healthy: bookie",
    )
    assert len(fake.calls()) == 1


def test_run_fails_when_the_dashboard_is_not_provisioned(tmp_path: Path) -> None:
    """Grafana answers but its search finds no dashboard with uid tombstone: the grafana step
    fails, exit 1."""
    fake = FakeDocker(tmp_path)
    _stack(
        fake,
        zk_after_trim=[12, 13, 14, CURSOR_LEDGER],
        objects_after_trim=[12, 13],
        dashboards=(),
    )
    result = fake.run()
    assert result.returncode == 1
    assert "FAIL grafana: the Tombstone dashboard (uid tombstone) is not provisioned" in (
        result.stdout
    )


# --- The Oxia variant ---------------------------------------------------------------------------


def test_oxia_run_passes_with_ledgers_listed_by_bookkeeper(tmp_path: Path) -> None:
    """SMOKE_METADATA=oxia: every compose call names both files, the stack step expects the
    Oxia containers instead of ZooKeeper, the bookkeeper step reads `listledgers` in the bookie
    container, and ZooKeeper's shell is never called."""
    fake = FakeDocker(tmp_path)
    _stack(fake, zk_after_trim=[12, 13, 14, CURSOR_LEDGER], objects_after_trim=[12, 13], oxia=True)
    result = fake.run(SMOKE_METADATA="oxia")
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert "PASS bookkeeper: 2 trimmed ledgers in /ledgers gone (10 11)" in result.stdout
    assert "PASS stack: all healthy: " + " ".join(OXIA_SERVICES) in result.stdout
    both = re.compile(r"^compose -f \S+/compose\.yaml -f \S+/compose\.oxia\.yaml ")
    assert [call for call in fake.calls() if not both.match(call)] == []
    assert not any("zookeeper" in call for call in fake.calls())


def test_oxia_run_fails_on_a_trimmed_ledger_bookkeeper_still_lists(tmp_path: Path) -> None:
    """On the Oxia variant, ledger 11 still listed by BookKeeper fails the bookkeeper step
    with its id, exit 1."""
    fake = FakeDocker(tmp_path)
    _stack(
        fake, zk_after_trim=[11, 12, 13, 14, CURSOR_LEDGER], objects_after_trim=[12, 13], oxia=True
    )
    result = fake.run(SMOKE_METADATA="oxia")
    assert result.returncode == 1
    assert "FAIL bookkeeper: trimmed ledgers in /ledgers still present: 11" in result.stdout


def test_oxia_services_checked_are_the_variant_s_long_running_ones() -> None:
    """The containers the stack step expects healthy on the Oxia variant are exactly the
    merged model's services that keep running (not the one-shot jobs)."""
    services = oxia_compose()["services"]
    running = {name for name, spec in services.items() if spec.get("restart") != "no"}
    assert running == set(OXIA_SERVICES)
