"""Report sections about the run: warnings, verdict, what --submit does or did, history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.scan.report.findings import min_age_s
from services.scan.report.format import human_bytes, human_count, human_duration, plural
from services.scan.report.history import RunDiff
from services.scan.report.html_blocks import bullets, para, section, table, text

Summary = Mapping[str, Any]
ALLOW_SHORT_MIN_AGE = "--allow-short-min-age"
NO_HEAD_OBJECTS = "--no-head-objects"
DELETED_NAMESPACE = "--deleted-namespace"
#: Submit lists shown in full up to this many rows (submitted.json holds them all).
MAX_ROWS = 200


def risky_options(summary: Summary) -> list[str]:
    options = list(summary.get("risky_options") or [])
    if summary.get("config", {}).get("min_age_below_floor") and ALLOW_SHORT_MIN_AGE not in options:
        options.append(ALLOW_SHORT_MIN_AGE)
    return options


def banner(summary: Summary) -> str:
    """A warning per risky option the run was made with (nothing when none was)."""
    window = human_duration(min_age_s(summary))
    why = {
        ALLOW_SHORT_MIN_AGE: f"the age window is {window}, below the 1-day safety floor: an "
        "unreferenced ledger whose reference is about to be written (rollover, cursor, schema, "
        "compaction) may be proposed.",
        NO_HEAD_OBJECTS: "offloaded objects were not read with HEAD (acknowledged with "
        "--accept-unattributed-objects): their owner and cluster names are unknown, so "
        "another cluster's objects in a shared bucket cannot be told apart and may be "
        "proposed.",
        DELETED_NAMESPACE: "namespaces without policies here were named as deleted ("
        + ", ".join(summary.get("config", {}).get("deleted_namespaces") or [])
        + "): their ledgers and objects are proposed when no declared cluster owns them. "
        "If another cluster sharing this BookKeeper holds a namespace of that name and is not "
        "declared with --shared-cluster, its live data is proposed.",
    }
    options = risky_options(summary)
    warnings = [str(w) for w in summary.get("warnings") or []]
    if not options and not warnings:
        return ""
    lines = [
        f"<code>{text(o)}</code>: {text(why.get(o, 'a safety check was relaxed.'))}"
        for o in options
    ]
    lines += [f"{text(w)}." for w in warnings]
    head = "Warning: this run used risky options." if options else "Warning."
    return f"<div id='risky' class='banner' role='alert'><b>{head}</b>{bullets(lines)}</div>"


def _submitted_counts(submitted: Mapping[str, Any]) -> tuple[int, int, int, int]:
    marked = submitted.get("marked") or {}
    total = sum(int(v) for v in marked.values()) if isinstance(marked, dict) else len(marked)
    refused = len(submitted.get("not_marked") or []) + len(submitted.get("refused") or [])
    return total, refused, len(submitted.get("skipped") or []), len(submitted.get("errors") or [])


def verdict(summary: Summary, submitted: Mapping[str, Any] | None) -> str:
    cands = summary.get("candidates", {})
    size = human_bytes(cands.get("bytes", 0))
    if summary.get("refused"):
        reasons = bullets(text(r) for r in summary.get("refusal_reasons", []))
        body = (
            "<b>REFUSED: no deletion proposed.</b> The scan cannot be trusted because:"
            f"{reasons}Fix the cause and run again; its findings are not charted here, since "
            "an incomplete scan makes referenced ledgers look orphaned."
        )
        return f"<div id='verdict' class='verdict refused'>{body}</div>"
    if submitted is not None:
        marked, refused, skipped, errors = _submitted_counts(submitted)
        plan = submitted.get("plan")
        sent = (
            f"{plural(int(plan.get('sent', 0)), 'candidate')} of the plan "
            f"<code>{text(plan.get('run_id'))}</code>"
            if isinstance(plan, dict)
            else f"{plural(cands.get('count', 0), 'candidate')} ({size})"
        )
        body = (
            f"<b>Submitted.</b> {sent} sent to the marker: "
            f"{plural(marked, 'copy', 'copies')} marked for deletion, "
            f"{refused} refused by the marker, {skipped} skipped, "
            f"{plural(errors, 'failed call')}."
        )
        cls = "submitted" if not errors else "refused"
        return f"<div id='verdict' class='verdict {cls}'>{body}</div>"
    if summary.get("dry_run") is False:
        body = (
            "<b>Submit started but left no record</b> (<code>submitted.json</code> is "
            "missing): it was probably interrupted. What was marked is in the marker's log."
        )
        return f"<div id='verdict' class='verdict refused'>{body}</div>"
    count = int(cands.get("count", 0))
    what = f"{plural(count, 'deletion candidate')} ({size})" if count else "Nothing to delete"
    body = f"<b>{what}.</b> Dry run: nothing was submitted."
    return f"<div id='verdict' class='verdict ok'>{body}</div>"


def submit_plan(summary: Summary) -> str:
    """What `--submit` would send, to whom, and what happens to it next."""
    title = "What --submit will do"
    if summary.get("refused"):
        return section("submit-plan", title, para("Nothing: a refused run has no candidates."))
    plan = summary.get("submit_plan") or {}
    groups = plan.get("by_component", [])
    if not groups:
        return section("submit-plan", title, para("Nothing: there are no candidates."))
    rows = ((g["ledger_type"], g["component"], g["count"], human_bytes(g["bytes"])) for g in groups)
    steps = bullets(
        [
            f"send {plural(sum(g['count'] for g in groups), 'candidate')} of "
            f"{plural(plan.get('owners', 0), 'owner')} (topics, subscriptions, schemas) to "
            "the marker as <code>RECONCILER</code> MarkLedgers calls, at least one per owner, "
            "at <code>--submit-rate</code> calls per second;",
            "the marker writes one pending-delete intent per ledger tier; it refuses a ledger "
            "whose metadata changed since the scan (znode version) or that is already pending;",
            "the verifier re-checks every intent against the metadata store before any byte goes: "
            "a ledger referenced again, or younger than its window, is kept;",
            "only then do the deleters remove the BookKeeper ledger or the offloaded objects. "
            "The result lands in <code>submitted.json</code> and in this report.",
        ]
    )
    return section(
        "submit-plan",
        title,
        table(("tier", "component", "candidates", "bytes"), rows, numeric=(2, 3)),
        steps,
    )


def submitted_section(submitted: Mapping[str, Any]) -> str:
    """What the submit did: marked per tier, refused by the marker, skipped, failed calls."""
    marked = submitted.get("marked") or {}
    parts = []
    if isinstance(marked, dict):
        parts.append(table(("tier", "marked"), sorted(marked.items()), numeric=(1,), cls="marked"))
    parts.append(para(f"{submitted.get('calls', 0)} MarkLedgers calls."))
    plan = submitted.get("plan")
    if isinstance(plan, dict):
        parts.append(_plan_para(plan))
    lists = (
        ("submitted", "Submitted"),
        ("no_longer_candidates", "Planned, no longer candidates (not sent)"),
        ("not_marked", "Refused by the marker"),
        ("refused", "Refused"),
        ("skipped", "Skipped before sending"),
        ("errors", "Failed calls"),
    )
    for key, title in lists:
        entries = submitted.get(key)
        if isinstance(entries, list) and entries:
            parts.append(f"<h3>{text(title)} ({len(entries)})</h3>" + _entries(entries))
    return section("submitted", "What --submit did", *parts)


def _plan_para(plan: Mapping[str, Any]) -> str:
    """--plan: how much of the reviewed dry run was sent, and what was held back."""
    return para(
        f"Submitted from the plan <code>{text(plan.get('run_id'))}</code> (an earlier dry "
        f"run, re-verified by this run): {plan.get('sent', 0)} of "
        f"{plural(int(plan.get('planned', 0)), 'planned candidate')} sent; "
        f"{plan.get('no_longer_candidates', 0)} no longer candidates (not sent, listed "
        f"below); {plural(int(plan.get('outside_plan', 0)), 'new candidate')} outside the "
        "plan not sent.",
        "plan",
    )


def _entries(entries: Sequence[Any]) -> str:
    """Rows of dicts as a table with the union of their keys; nested values as text."""
    shown = list(entries[:MAX_ROWS])
    keys: list[str] = []
    for entry in shown:
        for key in entry if isinstance(entry, dict) else ["value"]:
            if key not in keys:
                keys.append(key)
    rows = (
        tuple(_cell(e.get(k)) if isinstance(e, dict) else _cell(e) for k in keys) for e in shown
    )
    more = len(entries) - len(shown)
    tail = para(f"… and {more} more in <code>submitted.json</code>.") if more > 0 else ""
    return table(keys, rows) + tail


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v not in (None, "", []))
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)


def history(diff: RunDiff | None, summary: Summary) -> str:
    title = "Since the previous run"
    if diff is None:
        return section("history", title, para("No previous complete run in this output folder."))
    before = diff.previous
    old, cur = before.get("candidates", {}), summary.get("candidates", {})
    then = "refused" if before.get("refused") else "allowed"
    now = "refused" if summary.get("refused") else "allowed"
    parts = [
        para(f"Previous run: <code>{text(diff.previous_id)}</code>."),
        table(
            ("", "previous run", "this run"),
            [
                ("verdict", then, now),
                ("candidates", human_count(old.get("count", 0)), human_count(cur.get("count", 0))),
                ("bytes", human_bytes(old.get("bytes", 0)), human_bytes(cur.get("bytes", 0))),
            ],
            numeric=(1, 2),
        ),
    ]
    if diff.new is not None and diff.gone is not None:
        parts.append(
            bullets(
                [
                    f"{plural(len(diff.new), 'new candidate')}{_examples(diff.new)}",
                    f"{plural(len(diff.gone), 'candidate')} of the previous run no longer "
                    f"proposed (deleted, or referenced again){_examples(diff.gone)}",
                    f"{plural(diff.kept, 'candidate')} in both runs",
                ]
            )
        )
    if diff.kinds:
        rows = (
            (k["source"], k["kind"], k["before"], k["now"], f"{k['now'] - k['before']:+d}")
            for k in diff.kinds
        )
        parts.append(table(("source", "kind", "before", "now", "change"), rows, numeric=(2, 3, 4)))
    else:
        parts.append(para("The counts by kind are unchanged."))
    return section("history", title, *parts)


def _examples(keys: Sequence[tuple[str, int, str]]) -> str:
    if not keys:
        return ""
    shown = ", ".join(f"{'ledger' if t == 'LEDGER' else 'offload'} {i}" for t, i, _ in keys[:10])
    return f": {text(shown)}" + (", …" if len(keys) > 10 else "")
