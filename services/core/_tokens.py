"""Parsing of the token table: token -> (subject, roles).

Two forms are accepted, from a file or inline:

* JSON: `{"<token>": {"subject": "broker-1", "roles": ["broker"]}}` or `{"<token>": ["broker"]}`
* lines: `<token> <role>[,<role>...] [<subject>]`; `;` also separates entries, `#` starts a
  comment. The subject defaults to the first role.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """Who a token belongs to."""

    subject: str
    """A name for logs and audit lines (never the token itself)."""
    roles: frozenset[str]
    """Roles granted to the token holder, e.g. `broker`, `deleter`, `admin`."""


def parse_tokens(text: str) -> dict[str, Principal]:
    """Parse either form. Raises `ValueError` saying what is wrong (never echoing a token)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return _parse_json(stripped)
    return _parse_lines(stripped)


def _parse_json(text: str) -> dict[str, Principal]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object of token -> roles")
    table: dict[str, Principal] = {}
    for index, (token, entry) in enumerate(data.items(), start=1):
        roles: object
        subject: object
        if isinstance(entry, list):
            roles, subject = entry, None
        elif isinstance(entry, dict):
            roles, subject = entry.get("roles"), entry.get("subject")
        else:
            raise ValueError(f"entry {index}: expected a list of roles or an object")
        table[_check_token(token, index)] = _principal(roles, subject, index)
    return table


def _parse_lines(text: str) -> dict[str, Principal]:
    table: dict[str, Principal] = {}
    entries = [part for line in text.splitlines() for part in line.split(";")]
    for index, entry in enumerate(entries, start=1):
        words = entry.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) not in (2, 3):
            raise ValueError(f"entry {index}: expected '<token> <role>[,<role>] [<subject>]'")
        roles = [role for role in words[1].split(",") if role]
        subject = words[2] if len(words) == 3 else None
        table[_check_token(words[0], index)] = _principal(roles, subject, index)
    return table


def _check_token(token: object, index: int) -> str:
    if not isinstance(token, str) or not token or any(c.isspace() for c in token):
        raise ValueError(f"entry {index}: a token must be a non-empty string without spaces")
    return token


def _principal(roles: object, subject: object, index: int) -> Principal:
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles):
        raise ValueError(f"entry {index}: roles must be a non-empty list of names")
    if subject is not None and not isinstance(subject, str):
        raise ValueError(f"entry {index}: subject must be a string")
    return Principal(subject=subject or roles[0], roles=frozenset(roles))
