"""The reconciler CLI's usage errors."""

from __future__ import annotations

import click


class UsageProblem(click.ClickException):
    """One line on stderr, exit 2 (like click's own usage errors)."""

    exit_code = 2
