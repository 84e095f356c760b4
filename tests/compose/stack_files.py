"""Reading compose/: the Compose file (with YAML merge keys), `.env.example`, the Dockerfile
and the Prometheus configuration, and Compose's `${VAR}` interpolation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "compose"
COMPOSE_FILE = COMPOSE_DIR / "compose.yaml"
OXIA_FILE = COMPOSE_DIR / "compose.oxia.yaml"
OXIA_CLUSTER = COMPOSE_DIR / "oxia" / "cluster.yaml"
ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
DOCKERFILE = COMPOSE_DIR / "Dockerfile"
PROMETHEUS = COMPOSE_DIR / "prometheus.yml"
TOMBSTONE_SERVICES = ("marker", "verifier", "deleter")

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}; $$ is a "$".
_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
)


def compose() -> dict[str, Any]:
    """The Compose file as plain data, merge keys (`<<:`) applied."""
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return data


def oxia_compose() -> dict[str, Any]:
    """compose.yaml with compose.oxia.yaml merged onto it, as `docker compose -f compose.yaml
    -f compose.oxia.yaml` builds the model (tests/compose/compose_merge.py)."""
    from tests.compose.compose_merge import load_tagged, merge

    return merge(compose(), load_tagged(OXIA_FILE))


def env_example() -> dict[str, str]:
    """`NAME=value` lines of `.env.example` (comments and blank lines skipped)."""
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            name, _, value = stripped.partition("=")
            values[name.strip()] = value.strip()
    return values


def referenced_variables(text: str) -> dict[str, str]:
    """Variables that `text` interpolates, mapped to their operator ("" / ":-" / ":?"...)."""
    return {
        m.group("name"): m.group("op") or ""
        for m in _VARIABLE.finditer(text)
        if m.group("name") is not None
    }


def interpolate(text: str, values: dict[str, str]) -> str:
    """Compose's interpolation of one string; raises KeyError for a required unset variable."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group("name"), match.group("op"), match.group("arg")
        value = values.get(name)
        unset_or_empty = value is None or (op is not None and op.startswith(":") and not value)
        if op in (":-", "-") and unset_or_empty:
            return str(arg)
        if op in (":?", "?") and unset_or_empty:
            raise KeyError(f"{name}: {arg}")
        return value or ""

    return _VARIABLE.sub(replace, text)


def service_environment(
    service: str, values: dict[str, str], model: dict[str, Any] | None = None
) -> dict[str, str]:
    """The environment a service's container gets, interpolated with `values`, from `model`
    (compose.yaml when None)."""
    model = compose() if model is None else model
    environment = model["services"][service].get("environment", {})
    assert isinstance(environment, dict), f"{service}: environment must be a mapping"
    return {name: interpolate(str(raw), values) for name, raw in environment.items()}


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile as stages of (INSTRUCTION, arguments), continuation lines joined."""
    stages: list[list[tuple[str, str]]] = []
    logical = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    for line in logical.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        instruction, _, arguments = stripped.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction.upper(), arguments.strip()))
    return stages
