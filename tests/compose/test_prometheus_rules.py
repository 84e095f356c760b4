"""The Prometheus rules in compose/prometheus: valid (`promtool check rules`), their unit tests
pass (`promtool test rules`), loaded by the compose Prometheus, and naming only metrics the
services export.

promtool comes from Debian's `prometheus` package (scripts/bootstrap.sh installs it); without
it these tests fail rather than skip, so CI cannot pass with the rules untested.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from services.core._interceptors import LoggingInterceptor
from services.core.config import GrpcServerConfig
from services.core.grpc_server import ServiceRunner
from services.deleter.metrics import DeleterMetrics
from services.marker.follower.metrics import FollowerMetrics
from services.marker.metrics import MarkerMetrics
from services.verifier.metrics import VerifierMetrics
from tests.compose.stack_files import COMPOSE_FILE, PROMETHEUS, ROOT

RULES_DIR = ROOT / "compose" / "prometheus" / "rules"
TESTS_DIR = ROOT / "compose" / "prometheus" / "tests"
PROMETHEUS_OWN = frozenset({"up"})
"""Series Prometheus writes itself for every target."""


def rule_files() -> list[Path]:
    return sorted(RULES_DIR.glob("*.yml"))


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is missing: run scripts/bootstrap.sh (Debian prometheus)"
    return subprocess.run(
        [tool, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules() -> None:
    """`promtool check rules` accepts every rule file."""
    files = rule_files()
    result = promtool("check", "rules", *files)
    assert (bool(files), result.returncode) == (True, 0), result.stdout + result.stderr


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    """`promtool test rules`: every alert fires on its bad series, none on healthy ones."""
    tests = sorted(TESTS_DIR.glob("*.yml"))
    result = promtool("test", "rules", *tests)
    assert (bool(tests), result.returncode) == (True, 0), result.stdout + result.stderr


def test_the_compose_prometheus_loads_the_rules() -> None:
    """compose.yaml mounts the rules where prometheus.yml's `rule_files` looks for them."""
    config = yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))
    compose = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    volumes = compose["services"]["prometheus"]["volumes"]
    expected = (["/etc/prometheus/rules/*.yml"], True)
    actual = (config["rule_files"], "./prometheus/rules:/etc/prometheus/rules:ro" in volumes)
    assert expected == actual


def registries() -> Iterator[CollectorRegistry]:
    """The registries the services build: each service's runner (build info, auth exposure),
    its metrics classes, and the gRPC interceptor's `rpc_*` metrics of a served service."""
    for service, attach in (
        ("marker", MarkerMetrics),
        ("marker", FollowerMetrics),  # a marker run with --follow
        ("verifier", VerifierMetrics),
        ("deleter", DeleterMetrics),
    ):
        runner = ServiceRunner(
            name=service, grpc=GrpcServerConfig(), method_roles={}, handle_signals=False
        )
        attach(runner.metrics)
        LoggingInterceptor(runner.metrics)
        yield runner.metrics.registry


def exported_names() -> set[str]:
    """Every series name the three services can export, from their own registries."""
    return {name for registry in registries() for name in _series_names(registry)}


def _series_names(registry: CollectorRegistry) -> Iterator[str]:
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("_sum", "_count"),
    }
    for family in registry.collect():
        for suffix in suffixes.get(family.type, ("",)):
            yield family.name + suffix


def rule_expressions() -> Iterator[tuple[str, str]]:
    for path in rule_files():
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for rule in group["rules"]:
                yield rule.get("alert") or rule["record"], rule["expr"]


_NOT_NAMES = re.compile(
    r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"
)
"""Label matchers, ranges and label lists: what is left names series, functions, operators."""
_IDENTIFIER = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")
_OPERATORS = frozenset({"and", "or", "unless", "bool", "offset"})


def series_names(expr: str) -> set[str]:
    """The metric and recording-rule names an expression reads."""
    return set(_IDENTIFIER.findall(_NOT_NAMES.sub(" ", expr))) - _OPERATORS


@pytest.mark.parametrize(("rule", "expr"), list(rule_expressions()))
def test_every_metric_in_the_rules_is_exported(rule: str, expr: str) -> None:
    """A rule on a misspelt or removed metric would never fire: each series it names is one
    the services register (or Prometheus's own `up`), each recording rule it uses exists."""
    read = series_names(expr)
    recorded = {name for name in read if ":" in name}
    names = read - recorded
    defined = {name for name, _ in rule_expressions() if name.startswith("tombstone:")}
    unknown = names - exported_names() - PROMETHEUS_OWN
    assert (bool(names | recorded), unknown, recorded - defined) == (True, set(), set())
