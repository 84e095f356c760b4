"""The reconciler's HTML report, drawn from a summary fixture (no Spark) and read back as the
DOM headless Chromium builds from it."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from services.scan.analysis.classify import DELETABLE_KINDS
from services.scan.analysis.clusters import HEAD_UNRECORDED
from services.scan.report.findings import PROPOSABLE
from services.scan.report.format import KIND_REASONS, human_bytes, human_duration, topic_of_ml
from services.scan.report.history import previous_run
from services.scan.report.svg import bytes_axis, count_axis
from services.scan.report.write import write_html_report
from services.scan.submit.send import SubmitReport, record_submission
from tests.scan import report_fixture as R
from tests.scan.chromium import dump_dom

SECTIONS = ["risky", "verdict", "submit-plan", "coverage", "candidates", "kinds", "namespaces"]
SECTIONS += ["ages", "history", "also"]


class Dom(HTMLParser):
    """Element ids, resource references, table rows by table class, and all text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.refs: list[tuple[str, str, str]] = []
        self.rows: dict[str, int] = {}
        self.text: list[str] = []
        self.svgs = 0
        self.svg_text: list[str] = []
        self._in_svg = False
        self._svg_label = ""
        self.age_bars: list[tuple[float, float]] = []
        self.age_window: list[float] = []
        self._table = ""
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        for name in ("src", "href", "srcset", "xlink:href", "data"):
            if found.get(name) is not None:
                self.refs.append((tag, name, str(found[name])))
        if tag == "link" or (tag == "script" and "src" in found):
            self.refs.append((tag, "link", str(found)))
        if tag == "svg":
            self.svgs += 1
            self._in_svg = True
            self._svg_label = str(found.get("aria-label"))
        if self._svg_label.startswith("Orphans by age"):
            if tag == "rect" and found.get("class") == "bar":
                self.age_bars.append((float(str(found["x"])), float(str(found["width"]))))
            if tag == "line" and found.get("class") == "window":
                self.age_window.append(float(str(found["x1"])))
        if tag == "table":
            self._table = str(found.get("class") or "")
        if tag == "tr":
            self.rows[self._table] = self.rows.get(self._table, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._in_svg = False
            self._svg_label = ""

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_svg and data.strip():
            self.svg_text.append(data.strip())

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def rendered(run_dir: Path) -> Dom:
    return Dom(dump_dom(run_dir / "report.html"))


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Dom:
    out = tmp_path_factory.mktemp("out")
    return rendered(R.write_history(out, R.no_head_summary()))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Dom:
    out = tmp_path_factory.mktemp("shared")
    return rendered(R.write_history(out, R.shared_bucket_summary()))


def test_allowed_report_has_every_section_in_order(allowed: Dom) -> None:
    """Banner, verdict, submit plan, coverage, candidates, charts, history, in that order."""
    assert [i for i in allowed.ids if i in SECTIONS] == SECTIONS


def test_report_loads_nothing_from_outside(allowed: Dom) -> None:
    """Self-contained: no image, stylesheet or script file; links only to the CSVs beside it."""
    assert sorted({ref for _, _, ref in allowed.refs}) == ["items.csv", "tasks.csv"]


def test_candidate_rows_say_why_and_decode_names(allowed: Dom) -> None:
    """One row per listed item (plus the header), the deletable column first, topic and
    subscription names decoded as Pulsar's Codec.decode does."""
    text = allowed.all_text
    assert allowed.rows["items"] == len(R.ITEMS) + 1
    assert [
        f"{R.ORDERS_TOPIC} subscription billing/daily" in text,
        "%2F" in text or "orders+eu" in text,
        "its topic (managed ledger) no longer exists" in text,
        "age 5 h, window 3 d" in text,
    ] == [True, False, True, True]


def test_banner_names_the_risky_option(allowed: Dom) -> None:
    """--no-head-objects is shown as a warning with what it costs and its acknowledgement."""
    assert re.search(r"Warning: this run used risky options\. --no-head-objects", allowed.all_text)
    assert [
        "acknowledged with --accept-unattributed-objects" in allowed.all_text,
        "another cluster's objects in a shared bucket cannot be told apart" in allowed.all_text,
    ] == [True, True]


def test_objects_of_unknown_cluster_are_shown_as_such(allowed: Dom) -> None:
    """Without HEAD: the count of objects of unknown cluster, and the proposed object's
    reason says its cluster is unknown."""
    text = allowed.all_text
    assert "other-clusters" in allowed.ids
    assert [
        "8 Pulsar-named objects (31.5 MiB) of unknown cluster" in text,
        "2 of them deletable" in text,
        "no topic lists this ledger with this offload uuid; its cluster is unknown" in text,
    ] == [True] * 3


def test_other_clusters_objects_have_their_own_section(shared: Dom) -> None:
    """A shared bucket: the excluded objects per cluster after the coverage, each row and the
    listed item saying which cluster they belong to; no warning banner."""
    text = shared.all_text
    order = [i for i in shared.ids if i in ("coverage", "other-clusters", "candidates")]
    assert (order, "risky" in shared.ids) == (["coverage", "other-clusters", "candidates"], False)
    assert shared.rows["clusters"] == 3
    assert [
        "3 objects (7.0 MiB) in the scanned buckets name another Pulsar cluster than c1" in text,
        "east 2 4.0 MiB excluded: belongs to cluster east" in text,
        "west 1 3.0 MiB excluded: belongs to cluster west" in text,
        "object offload/e5c2-ledger-31" in text,
    ] == [True] * 4
    assert shared.rows["items"] == len(R.ITEMS) + 2


def test_unrecorded_head_is_a_warning(tmp_path: Path) -> None:
    """An extract that does not say whether objects were read with HEAD: a warning banner
    (not a risky option), and objects naming no cluster shown as of unknown cluster."""
    body = R.summary(warnings=[HEAD_UNRECORDED])
    body["scan"] |= {"objects_headed": None}
    body |= {
        "other_clusters": {"objects": 0, "bytes": 0, "by_cluster": []},
        "unattributed_objects": {"objects": 8, "bytes": 1024, "deletable": 2},
    }
    dom = Dom(write_html_report(tmp_path, body).read_text())
    assert ("risky" in dom.ids, "risky options" in dom.all_text) == (True, False)
    assert [
        "does not record whether offloaded objects were read with HEAD" in dom.all_text,
        "of unknown cluster" in dom.all_text,
    ] == [True, True]


def test_shared_bookkeeper_section_and_deleted_namespace_banner(tmp_path: Path) -> None:
    """What was set apart on a shared BookKeeper: a row per kind, cluster and namespace with
    why, after the other clusters' objects; `--deleted-namespace` in the banner with the
    names; the undeclared replication warning there too."""
    warning = (
        "namespaces public/default replicate to east: if these share our BookKeeper, declare "
        "them with --shared-cluster"
    )
    body = R.summary(risky_options=["--deleted-namespace"], warnings=[warning])
    body["config"] |= {"deleted_namespaces": ["gone/ns"]}
    body |= {
        "other_clusters": {"objects": 0, "bytes": 0, "by_cluster": []},
        "unattributed_objects": {"objects": 0, "bytes": 0, "deletable": 0},
        "shared_bookkeeper": {
            "declared": ["north"],
            "namespaces_listed": True,
            "namespaces": 4,
            "deleted_namespaces": ["gone/ns"],
            "replicated_undeclared": {"public/default": ["east"]},
            "held_apart": [
                {
                    "kind": "neighbour_owner",
                    "cluster": "north",
                    "namespace": "n1/ns",
                    "ledgers": 2,
                    "objects": 0,
                    "bytes": 2 * 1024,
                },
                {
                    "kind": "replicated_undeclared",
                    "cluster": None,
                    "namespace": "public/default",
                    "ledgers": 3,
                    "objects": 1,
                    "bytes": 1024,
                },
                {
                    "kind": "unknown_namespace",
                    "cluster": None,
                    "namespace": "east-1/default",
                    "ledgers": 5,
                    "objects": 0,
                    "bytes": 4096,
                },
            ],
        },
    }
    dom = Dom(write_html_report(tmp_path, body).read_text())
    text = dom.all_text
    order = [i for i in dom.ids if i in ("other-clusters", "shared-bookkeeper", "candidates")]
    assert order == ["other-clusters", "shared-bookkeeper", "candidates"]
    assert dom.rows["shared"] == 4  # the header and one row per entry
    assert [
        "its owner exists in declared cluster north, not here" in text,
        "its namespace replicates to east, not declared" in text,
        "its namespace has no policies here" in text,
        "10 ledgers and 1 object are set apart" in text,
        "namespaces without policies here were named as deleted (gone/ns)" in text,
        warning in text,
    ] == [True] * 6


def test_charts_have_honest_axes(allowed: Dom) -> None:
    """Three inline charts; sizes in MiB (the data's unit), no negative tick, the window
    labelled where it is; durations human."""
    labels = allowed.svg_text
    assert allowed.svgs == 3
    assert [
        {"0 MiB", "1 MiB", "2 MiB", "3 MiB", "5 MiB"} <= set(labels),
        [label for label in labels if "GiB" in label or label.startswith("-")],
        [label for label in labels if label.startswith("age window")],
        "days" in allowed.all_text,
    ] == [True, [], ["age window 3 d"], False]


def test_age_window_line_separates_the_bars_it_should(allowed: Dom) -> None:
    """The fixture's orphans: 1 ledger of 1–6 h (too young), 2 ledgers and 2 objects of
    3–7 d, 12 ledgers ≥ 7 d. The 3 d line has one bar on its left, three on its right, and
    the two bars of one range sit side by side."""
    (window,) = allowed.age_window
    bars = sorted(allowed.age_bars)
    left = [x for x, _ in bars if x + 0.0 < window]
    (ledgers, width), (objects, _) = bars[1], bars[2]
    assert (len(left), len(bars), round(ledgers + width, 1)) == (1, 4, round(objects, 1))


def test_history_compares_with_the_previous_run(allowed: Dom) -> None:
    """Ledger 102 is new, ledger 100 of the previous run is gone, and topic_gone went 2 → 1."""
    text = allowed.all_text
    assert [
        f"Previous run: {R.PREVIOUS}" in text,
        "1 new candidate: ledger 102" in text,
        "(deleted, or referenced again): ledger 100" in text,
        "ledger topic_gone 2 1 -1" in text,
    ] == [True] * 4


def test_refused_report_shows_the_reasons_and_no_chart(tmp_path: Path) -> None:
    """A refused scan: the refusal with its reason and the coverage; no candidates, no chart,
    no summary of its (untrusted) findings."""
    run = tmp_path / R.RUN
    run.mkdir()
    write_html_report(run, R.refused_summary())
    dom = rendered(run)
    assert (dom.svgs, "candidates" in dom.ids, "verdict" in dom.ids) == (0, False, True)
    assert "REFUSED: no deletion proposed." in dom.all_text
    assert [
        "StoreUnavailable: connection refused" in dom.all_text,
        "too_young" in dom.all_text,
    ] == [True, False]


def test_submitted_report_lists_what_was_marked_and_refused(tmp_path: Path) -> None:
    """After --submit, submitted.json (services.scan.submit.write_report's shape) replaces
    the plan: marked per tier, the marker's refusals with their reason."""
    record = {
        "calls": 3,
        "marked": {"LEDGER": 2, "OFFLOAD_LEDGER": 1},
        "not_marked": [
            {"owner": R.ORDERS_ML, "ledger_id": 103, "reason": "VERSION_MISMATCH", "message": ""}
        ],
        "skipped": [],
        "errors": [],
        "ok": True,
    }
    (tmp_path / "submitted.json").write_text(json.dumps(record))
    page = write_html_report(tmp_path, R.summary(dry_run=False)).read_text()
    dom = Dom(page)
    assert ("submitted" in dom.ids, "submit-plan" in dom.ids) == (True, False)
    assert [
        "Submitted. 3 candidates (5.0 MiB) sent to the marker: 3 copies marked" in dom.all_text,
        "Refused by the marker (1)" in dom.all_text,
        "VERSION_MISMATCH" in dom.all_text,
    ] == [True] * 3


def test_a_submit_rewrites_the_summary_and_the_report(tmp_path: Path) -> None:
    """`record_submission` (what `reconcile run --submit` calls after sending): the dry run's
    summary.json and report.html stop saying "dry run" and show what the marker did."""
    (tmp_path / "summary.json").write_text(json.dumps(R.summary()))
    before = Dom(write_html_report(tmp_path).read_text())
    assert ("submit-plan" in before.ids, "submitted" in before.ids) == (True, False)
    report = SubmitReport(calls=3, marked={"LEDGER": 2, "OFFLOAD_LEDGER": 1})
    report.not_marked.append(
        {"owner": R.ORDERS_ML, "ledger_id": 103, "reason": "VERSION_MISMATCH", "message": ""}
    )
    record_submission(tmp_path, report)
    summary = json.loads((tmp_path / "summary.json").read_text())
    after = Dom((tmp_path / "report.html").read_text())
    assert (summary["dry_run"], json.loads((tmp_path / "submitted.json").read_text())["calls"]) == (
        False,
        3,
    )
    assert ("submit-plan" in after.ids, "submitted" in after.ids) == (False, True)
    assert ["Dry run" in before.all_text, "Dry run" in after.all_text] == [True, False]
    assert "VERSION_MISMATCH" in after.all_text


def test_previous_run_skips_incomplete_and_newer_runs(tmp_path: Path) -> None:
    """The newest older sibling with a summary and no INCOMPLETE marker."""
    names = ["20261120T000000Z", "20261121T000000Z", "20261122T000000Z", "20261124T000000Z"]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text("{}")
    (tmp_path / names[2] / "INCOMPLETE").write_text("")
    (tmp_path / "latest").symlink_to(tmp_path / names[3])
    run = tmp_path / "20261123T000000Z"
    run.mkdir()
    assert (previous_run(run), previous_run(tmp_path / names[0])) == (tmp_path / names[1], None)


def test_numbers_are_written_for_people() -> None:
    """Durations in units, bytes in the unit that fits, axes in that unit, names decoded."""
    assert [human_duration(30), human_duration(60), human_duration(3 * 86_400 + 7200)] == [
        "30 s",
        "1 min",
        "3 d 2 h",
    ]
    assert [human_bytes(900), human_bytes(3 * R.MIB)] == ["900 B", "3.0 MiB"]
    assert (bytes_axis(3.5 * R.MIB).unit, bytes_axis(3.5 * R.MIB).ticks) == ("MiB", (0, 1, 2, 3, 4))
    assert (count_axis(3).ticks, count_axis(4_800_000).label(5_000_000)) == (
        (0, 1, 2, 3),
        "5,000,000",
    )
    assert topic_of_ml("t/c/ns/persistent/a+b%25") == "persistent://t/c/ns/a b%"


def test_the_report_proposes_the_kinds_the_analysis_proposes() -> None:
    """The report's proposable kinds are the analysis' deletable kinds, compacted ledgers and
    delayed-delivery buckets included, each with a reason of its own."""
    assert sorted(DELETABLE_KINDS) == sorted(PROPOSABLE)
    assert all(kind in KIND_REASONS for kind in PROPOSABLE)
