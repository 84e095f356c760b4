"""Compose's merge of an override file onto a base file, restated for the spec tests.

The rules are the Compose specification's "Merge" section (`docs.docker.com/reference/
compose-file/merge/`) as compose-go applies them (`loader/merge.go`, `loader/reset.go`):

- a mapping is merged key by key, recursively;
- a sequence is appended to, except `command`, `entrypoint` and `healthcheck.test`, which the
  later file replaces, and the unique resources `ports` and `volumes`, where a later entry
  replaces the earlier one with the same unique key (the container port and protocol; the
  mount target);
- `!reset <anything>` removes the key from the merged model; `!override <value>` replaces the
  earlier value without merging.

Only what the stack's files use is modelled: `depends_on` and `environment` as mappings, short
port and volume syntax. Anything else raises `NotModelled`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_REPLACED = {("command",), ("entrypoint",), ("healthcheck", "test")}
_UNIQUE = {"ports", "volumes"}


class NotModelled(ValueError):
    """A shape of Compose file the restated rules do not cover."""


@dataclass(frozen=True)
class Reset:
    """`!reset`: the key is removed from the merged model."""


@dataclass(frozen=True)
class Override:
    """`!override`: the value replaces the earlier one as a whole."""

    value: Any


class _TaggedLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types here
    """PyYAML's safe loader (merge keys included) that also reads Compose's two tags."""


def _reset(loader: yaml.SafeLoader, node: yaml.Node) -> Reset:
    return Reset()


def _override(loader: yaml.SafeLoader, node: yaml.Node) -> Override:
    if isinstance(node, yaml.MappingNode):
        return Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Override(loader.construct_sequence(node, deep=True))
    return Override(loader.construct_scalar(node))


_TaggedLoader.add_constructor("!reset", _reset)
_TaggedLoader.add_constructor("!override", _override)


def load_tagged(path: Path) -> dict[str, Any]:
    """A Compose file with `!reset` and `!override` kept as `Reset` / `Override` values."""
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaggedLoader)
    if not isinstance(data, dict):
        raise NotModelled(f"{path}: not a mapping")
    return data


def tagged_paths(data: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    """Every `Reset` or `Override` in a loaded file, by its path."""
    found: dict[tuple[str, ...], object] = {}
    if isinstance(data, Reset | Override):
        found[path] = data
    elif isinstance(data, Mapping):
        for key, value in data.items():
            found |= tagged_paths(value, (*path, str(key)))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found |= tagged_paths(value, (*path, f"[{index}]"))
    return found


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` merged onto `base` (neither is changed)."""
    return _merge_mapping(base, override, ())


def _merge_mapping(
    base: Mapping[str, Any], override: Mapping[str, Any], path: tuple[str, ...]
) -> dict[str, Any]:
    result = {key: _plain(value) for key, value in base.items()}
    for key, value in override.items():
        here = (*path, str(key))
        if isinstance(value, Reset):
            result.pop(key, None)
        elif isinstance(value, Override):
            result[key] = _plain(value.value)
        elif key in result:
            result[key] = _merge_value(result[key], value, here)
        else:
            result[key] = _plain(value)
    return result


def _merge_value(earlier: Any, later: Any, path: tuple[str, ...]) -> Any:
    if isinstance(earlier, Mapping) and isinstance(later, Mapping):
        return _merge_mapping(earlier, later, path)
    if isinstance(earlier, list) and isinstance(later, list):
        service_path = path[2:] if path[:1] == ("services",) else ()
        if service_path in _REPLACED:
            return _plain(later)
        if service_path and service_path[0] in _UNIQUE and len(service_path) == 1:
            return _merge_unique(earlier, later, service_path[0])
        return [*earlier, *_plain(later)]
    if isinstance(earlier, Mapping | list) or isinstance(later, Mapping | list):
        raise NotModelled(f"{'.'.join(path)}: a mapping or sequence meets another shape")
    return later


def _unique_key(entry: Any, kind: str) -> str:
    if not isinstance(entry, str):
        raise NotModelled(f"{kind}: long syntax is not modelled")
    if kind == "volumes":
        return entry.split(":")[1]
    target, _, protocol = entry.rsplit(":", 1)[-1].partition("/")
    return f"{target}/{protocol or 'tcp'}"


def _merge_unique(earlier: list[Any], later: list[Any], kind: str) -> list[Any]:
    replaced = {_unique_key(entry, kind) for entry in later}
    kept = [entry for entry in earlier if _unique_key(entry, kind) not in replaced]
    return [*kept, *later]


def _plain(value: Any) -> Any:
    """A value with every tag resolved as a file on its own would (no earlier value)."""
    if isinstance(value, Override):
        return _plain(value.value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if not isinstance(v, Reset)}
    if isinstance(value, list):
        return [_plain(v) for v in value if not isinstance(v, Reset)]
    return value
