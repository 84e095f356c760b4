"""The Grafana dashboard in compose/grafana: every panel reads series the services register
(or recording rules the rules file defines), every expression is valid PromQL
(`promtool check rules`), thresholds agree with the alerts they point at, and the compose
`grafana` service provisions the files that exist, against the `prometheus` service.

The exported names come from the services' own metrics classes built on fresh registries and
rendered with `registry.collect()`, as tests/compose/test_prometheus_rules.py does, plus the
gRPC interceptor's `rpc_*` metrics every served service registers; the labels a query groups,
matches or prints come from the same metrics. A renamed metric or label fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from tests.compose.stack_files import COMPOSE_DIR, compose, env_example, service_environment
from tests.compose.test_prometheus_rules import (
    _series_names,
    exported_names,
    promtool,
    registries,
    rule_expressions,
    series_names,
)

GRAFANA_DIR = COMPOSE_DIR / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "tombstone.json"
DATASOURCES = GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml"
PROVIDERS = GRAFANA_DIR / "provisioning" / "dashboards" / "tombstone.yml"
PROMETHEUS_OWN = {"up": frozenset(), "ALERTS": frozenset({"alertname", "alertstate", "severity"})}
"""Series Prometheus writes itself (a target's `up`, `ALERTS` for pending and firing alerts)
and the labels they carry besides `job` and `instance`."""
TARGET_LABELS = frozenset({"job", "instance"})
"""Labels Prometheus adds to every scraped series."""

# Grafana's built-in variables, replaced by values of the same kind before parsing.
_GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
}
_USER_VARIABLE = re.compile(r"\$\{?(\w+)(?::\w+)?\}?")


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def panels(items: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels (a collapsed row keeps its own) included."""
    for panel in dashboard()["panels"] if items is None else items:
        yield panel
        yield from panels(panel.get("panels", []))


def expressions() -> Iterator[tuple[str, str]]:
    """(panel title and refId, PromQL) of every query."""
    for query, expr, _ in queries():
        yield query, expr


def queries() -> Iterator[tuple[str, str, str]]:
    """(panel title and refId, PromQL, legend) of every query."""
    for panel in panels():
        for target in panel.get("targets", []):
            yield f"{panel['title']} {target['refId']}", target["expr"], target["legendFormat"]


def substituted(expr: str) -> str:
    """The expression with Grafana's variables replaced: built-ins by a duration, a user
    variable (`$topic`) by a regex that matches anything."""
    for name, value in _GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return _USER_VARIABLE.sub(".*", expr)


def series_labels() -> dict[str, frozenset[str]]:
    """Every series name a scrape can show (`_total`, `_bucket`... included), with the labels
    it carries: its metric's own, `le` on buckets, and the target's."""
    labels: dict[str, frozenset[str]] = {}
    for registry in registries():
        # The registry's collectors hold the label names even before any child exists.
        for collector in list(registry._collector_to_names):
            own = frozenset(getattr(collector, "_labelnames", ()))
            single = CollectorRegistry()
            single.register(collector)
            for name in _series_names(single):
                extra = {"le"} if name.endswith("_bucket") else set()
                labels[name] = labels.get(name, frozenset()) | own | extra | TARGET_LABELS
    for name, own in PROMETHEUS_OWN.items():
        labels[name] = own | TARGET_LABELS
    for name, expr in rule_expressions():
        if name.startswith("tombstone:"):
            labels[name] = frozenset(_grouping_labels(expr))
    return labels


def known_names() -> set[str]:
    return set(series_labels())


_GROUPING = re.compile(r"\b(?:by|on|ignoring)\s*\(([^)]*)\)")
_MATCHERS = re.compile(r"\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _grouping_labels(expr: str) -> set[str]:
    return {label.strip() for group in _GROUPING.findall(expr) for label in group.split(",")} - {""}


def labels_used(expr: str, legend: str) -> set[str]:
    """Labels an expression groups, joins or matches on, and those its legend prints."""
    matched = {
        label for block in _MATCHERS.findall(expr) for label in _MATCHER_LABEL.findall(block)
    }
    return _grouping_labels(expr) | matched | set(_LEGEND_LABEL.findall(legend))


def test_the_dashboard_has_the_operators_rows() -> None:
    """One row per question, in the order an operator asks them, each with panels."""
    titles = [panel["title"] for panel in dashboard()["panels"] if panel["type"] == "row"]
    assert titles == [
        "Is anything leaking?",
        "How fast are we deleting?",
        "Are we hurting ZooKeeper or S3?",
        "Is the follower keeping up?",
        "Security",
        "Alerts",
    ]
    counts: list[int] = []
    for panel in dashboard()["panels"]:
        if panel["type"] == "row":
            counts.append(0)
        else:
            counts[-1] += 1
    assert 0 not in counts


@pytest.mark.parametrize(("query", "expr"), list(expressions()))
def test_every_series_of_the_dashboard_is_exported(query: str, expr: str) -> None:
    """A panel on a misspelt or renamed metric would show nothing: each name it reads is a
    series a service registers, a recording rule of the rules file, or Prometheus's own."""
    read = series_names(substituted(expr))
    assert (bool(read), read - known_names()) == (True, set())


def test_the_names_cover_those_the_rules_test_reads() -> None:
    """The names the dashboard may read hold every series the services export, the `rpc_*`
    metrics of served services among them."""
    names = known_names()
    assert (exported_names() - names, "tombstone_rpc_calls_total" in names) == (set(), True)


@pytest.mark.parametrize(("query", "expr", "legend"), list(queries()))
def test_every_label_of_the_dashboard_exists(query: str, expr: str, legend: str) -> None:
    """A panel grouping or matching on a renamed label would show nothing or one lump: each
    label a query uses (in `by`, `on`, a matcher or its legend) is carried by a series it
    reads (a recording rule carries the labels it groups by)."""
    known = series_labels()
    read = series_names(substituted(expr)) & set(known)
    carried = set().union(*(known[name] for name in read))
    assert labels_used(expr, legend) - carried == set()


def test_a_renamed_label_is_caught() -> None:
    """The label check is not vacuous: `by (backend)` on a metric labelled `tier` is reported."""
    known = series_labels()
    expr = "sum by (backend) (rate(tombstone_deleter_deleted_total[1m]))"
    assert labels_used(expr, "{{backend}}") - known["tombstone_deleter_deleted_total"] == {
        "backend"
    }


def test_a_renamed_metric_is_caught() -> None:
    """The check above is not vacuous: a name the services do not register is reported."""
    assert series_names("rate(tombstone_deleter_deletes_total[1m])") - known_names() == {
        "tombstone_deleter_deletes_total"
    }


def test_every_expression_parses(tmp_path: Path) -> None:
    """`promtool check rules` accepts every query, written as recording rules (Grafana's
    variables substituted first)."""
    rules = [
        {"record": f"dashboard:query_{index}", "expr": substituted(expr)}
        for index, (_, expr) in enumerate(expressions())
    ]
    path = tmp_path / "dashboard.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", path)
    assert (bool(rules), result.returncode) == (True, 0), result.stdout + result.stderr


def test_variables_are_substituted_before_parsing() -> None:
    assert substituted('rate(x{topic=~"$topic"}[$__rate_interval])') == 'rate(x{topic=~".*"}[1m])'


def _alert_thresholds() -> dict[str, set[float]]:
    """Each alert's non-zero constants compared with `>`/`<` (`... > 3600`)."""
    return {
        name: {float(n) for n in re.findall(r"[<>]=?\s*(\d+(?:\.\d+)?)", expr) if float(n)}
        for name, expr in rule_expressions()
        if not name.startswith("tombstone:")
    }


def test_panels_pointing_at_an_alert_share_its_threshold() -> None:
    """A panel whose description names an alert (`Alert: TombstoneX`) names one that exists,
    and when the alert compares with a number, the panel has a threshold step at it."""
    alerts = _alert_thresholds()
    named: dict[str, str] = {}
    wrong: dict[str, object] = {}
    for panel in panels():
        for alert in re.findall(r"Alert: (\w+)", panel.get("description", "")):
            named[alert] = panel["title"]
            if alert not in alerts:
                wrong[panel["title"]] = f"no alert {alert}"
                continue
            steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
            values = {step["value"] for step in steps if step["value"] is not None}
            if alerts[alert] - values:
                wrong[panel["title"]] = (alert, sorted(alerts[alert]), sorted(values))
    assert (bool(named), wrong) == (True, {})


def test_every_query_uses_the_provisioned_data_source() -> None:
    """Each panel and query names the data source by the uid provisioning gives it."""
    uid = yaml.safe_load(DATASOURCES.read_text(encoding="utf-8"))["datasources"][0]["uid"]
    used = {
        source["uid"]
        for panel in panels()
        if panel["type"] != "row"
        for source in [panel["datasource"], *(t["datasource"] for t in panel["targets"])]
    }
    assert used == {uid}


def test_panel_ids_are_unique_and_the_uid_is_fixed() -> None:
    """The smoke script and links find the dashboard by uid `tombstone`."""
    ids = [panel["id"] for panel in panels()]
    assert (dashboard()["uid"], len(ids)) == ("tombstone", len(set(ids)))


# --- The compose service ------------------------------------------------------------------


def _mounts() -> dict[str, Path]:
    """Container path -> repository path of the grafana service's bind mounts."""
    mounts = {}
    for volume in compose()["services"]["grafana"]["volumes"]:
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            mounts[target] = (COMPOSE_DIR / source).resolve()
    return mounts


def test_grafana_mounts_the_provisioning_and_dashboards_of_the_repository() -> None:
    """The provisioning directory and the dashboard directory are mounted read-only from
    compose/grafana, they hold the files tested here, and the dashboard provider reads the
    directory where the dashboards are mounted."""
    mounts = _mounts()
    provider = yaml.safe_load(PROVIDERS.read_text(encoding="utf-8"))["providers"][0]
    dashboards = mounts[provider["options"]["path"]]
    provisioning = mounts["/etc/grafana/provisioning"]
    read_only = all(
        volume.endswith(":ro")
        for volume in compose()["services"]["grafana"]["volumes"]
        if volume.startswith("./")
    )
    assert (read_only, provider["type"]) == (True, "file")
    assert {DATASOURCES, PROVIDERS} <= set(provisioning.rglob("*.yml"))
    assert DASHBOARD in set(dashboards.glob("*.json"))
    home = service_environment("grafana", env_example())[
        "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"
    ]
    home_dir, _, home_file = home.rpartition("/")
    assert mounts[home_dir] / home_file == DASHBOARD


def test_the_data_source_is_the_compose_prometheus() -> None:
    """The data source URL names the `prometheus` service on the port it listens on (the
    container side of its published port)."""
    source = yaml.safe_load(DATASOURCES.read_text(encoding="utf-8"))["datasources"][0]
    ports = {p.rsplit(":", 1)[1] for p in compose()["services"]["prometheus"]["ports"]}
    assert (source["type"], source["url"]) == ("prometheus", f"http://prometheus:{ports.pop()}")
    assert ports == set()


def test_anonymous_visitors_may_only_look() -> None:
    """Anonymous access is on with the Viewer role; the admin password comes from .env."""
    environment = compose()["services"]["grafana"]["environment"]
    assert (
        environment["GF_AUTH_ANONYMOUS_ENABLED"],
        environment["GF_AUTH_ANONYMOUS_ORG_ROLE"],
    ) == (
        "true",
        "Viewer",
    )
    assert environment["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert dashboard()["editable"] is False
