"""`python -m devstack.pulsar`: the broker command, as the test launcher starts it."""

from .cli import broker

broker()
