"""A small Pulsar-compatible broker for the local stack and the tests.

It speaks Pulsar's binary protocol (version 20) well enough for the real `pulsar-client`,
keeps topics in memory or in an append-only log on disk, answers a few admin HTTP paths and
lets tests inject faults. See docs/devstack-broker.md.
"""

from .broker import Broker, BrokerConfig
from .control import BrokerAdminError, BrokerControl
from .process import BrokerThread, PulsarBrokerProcess
from .server import BrokerServer, serve

__all__ = [
    "Broker",
    "BrokerAdminError",
    "BrokerConfig",
    "BrokerControl",
    "BrokerServer",
    "BrokerThread",
    "PulsarBrokerProcess",
    "serve",
]
