"""`python -m devstack.oxia`: the same as `tombstone devstack oxia`."""

from .cli import oxia

oxia()
