"""Admin HTTP: a few of Pulsar's `/admin/v2` paths, plus `/admin/devstack/...` for tests."""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from .authn import AuthenticationFailed, authenticate_http
from .broker import (
    INACTIVE_TOPIC_POLICIES,
    RETENTION,
    Broker,
    BrokerConfig,
    Conflict,
    PreconditionFailed,
    UnknownNamespace,
)
from .names import InvalidTopicName, TopicName
from .stats import partitioned_stats, topic_stats
from .subscription import SHARED


class AdminTarget(Protocol):
    """The server whose broker the admin API serves (`server.BrokerServer`)."""

    broker: Broker
    config: BrokerConfig

    async def restart_broker(self) -> None: ...


SERVER_KEY: web.AppKey[AdminTarget] = web.AppKey("server")
DEVSTACK = "/admin/devstack/"
TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"
NAMESPACE = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}"
Route = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _broker(request: web.Request) -> Broker:
    return request.app[SERVER_KEY].broker


def _topic_name(request: web.Request) -> TopicName:
    m = request.match_info
    return TopicName(m["domain"], m["tenant"], m["namespace"], m["topic"])


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Route) -> web.StreamResponse:
    """Map the broker's exceptions to Pulsar's HTTP statuses."""
    try:
        return await handler(request)
    except (UnknownNamespace, KeyError) as exc:
        return _error(404, str(exc))
    except Conflict as exc:
        return _error(409, str(exc))
    except PreconditionFailed as exc:
        return _error(412, str(exc))
    except (ValueError, TypeError, InvalidTopicName) as exc:
        return _error(400, str(exc))


@web.middleware
async def _authentication(request: web.Request, handler: Route) -> web.StreamResponse:
    """Pulsar's admin API answers 401 to a call without a credential its providers accept.
    The devstack's own test controls (`/admin/devstack/...`) stay open."""
    security = request.app[SERVER_KEY].config.security
    if security is None or not security.authenticate or request.path.startswith(DEVSTACK):
        return await handler(request)
    transport = request.transport
    found = transport.get_extra_info("ssl_object") if transport is not None else None
    ssl_object = found if isinstance(found, ssl.SSLObject) else None
    try:
        authenticate_http(security, request.headers.get("Authorization"), ssl_object)
    except AuthenticationFailed as exc:
        return _error(401, f"Authentication required: {exc}")
    return await handler(request)


async def create_partitioned(request: web.Request) -> web.Response:
    body = (await request.text()).strip()
    _broker(request).create_partitioned_topic(_topic_name(request), int(json.loads(body)))
    return web.Response(status=204)


async def get_partitions(request: web.Request) -> web.Response:
    name = _topic_name(request)
    _broker(request).check_namespace(name)
    return web.json_response({"partitions": _broker(request).partitions_of(name)})


async def create_topic(request: web.Request) -> web.Response:
    name = _topic_name(request)
    broker = _broker(request)
    broker.check_namespace(name)
    if name.full in broker.topics or name.full in broker.partitioned:
        raise Conflict(f"topic {name.full} already exists")
    broker.topic(name)
    return web.Response(status=204)


async def list_topics(request: web.Request) -> web.Response:
    m = request.match_info
    ns = f"{m['tenant']}/{m['namespace']}"
    broker = _broker(request)
    if ns not in broker.namespaces:
        raise UnknownNamespace(f"namespace {ns} does not exist")
    prefix = f"{m['domain']}://"
    return web.json_response([t for t in broker.topics_of_namespace(ns) if t.startswith(prefix)])


async def list_partitioned(request: web.Request) -> web.Response:
    m = request.match_info
    ns = f"{m['tenant']}/{m['namespace']}"
    names = [t for t in _broker(request).partitioned if TopicName.parse(t).ns == ns]
    return web.json_response(sorted(names))


async def get_stats(request: web.Request) -> web.Response:
    topic = _broker(request).topics.get(_topic_name(request).full)
    if topic is None:
        raise KeyError(f"topic {_topic_name(request).full} not found")
    return web.json_response(topic_stats(topic))


async def get_partitioned_stats(request: web.Request) -> web.Response:
    broker = _broker(request)
    name = _topic_name(request)
    count = broker.partitions_of(name)
    if count == 0:
        raise KeyError(f"partitioned topic {name.full} not found")
    per: dict[str, dict[str, Any]] = {}
    for i in range(count):
        part = name.partition(i)
        per[part.full] = topic_stats(broker.topic(part))
    return web.json_response(partitioned_stats(count, per))


def _targets(broker: Broker, name: TopicName) -> list[TopicName]:
    """The partitions of a partitioned topic, or the topic itself; 404 if it does not exist."""
    broker.check_namespace(name)
    count = broker.partitions_of(name)
    if count > 0:
        return [name.partition(i) for i in range(count)]
    if not broker.topic_exists(name):
        raise KeyError(f"Topic {name.full} not found")
    return [name]


async def list_subscriptions(request: web.Request) -> web.Response:
    """`getSubscriptions`: a partitioned topic answers the union over its partitions."""
    broker = _broker(request)
    names: set[str] = set()
    for target in _targets(broker, _topic_name(request)):
        topic = broker.topics.get(target.full)
        if topic is not None:
            names.update(n for n, sub in topic.subscriptions.items() if sub.durable)
    return web.json_response(sorted(names))


def _reset_position(body: Any, entries: int) -> int | None:
    """Where `ResetCursorData` puts a new subscription: None for latest (no body)."""
    if body is None:
        return None
    if not isinstance(body, dict):
        raise ValueError("expected a ResetCursorData object")
    ledger, entry = int(body.get("ledgerId", -1)), int(body.get("entryId", -1))
    if (ledger, entry) == (-1, -1):
        return 0
    if ledger == entry == (1 << 63) - 1:
        return entries
    raise ValueError("only the earliest and latest positions are supported here")


async def create_subscription(request: web.Request) -> web.Response:
    """`createSubscription`: durable, at `ResetCursorData`'s position (default latest), on
    every partition that lacks it; 409 when it exists everywhere already."""
    broker = _broker(request)
    name = _topic_name(request)
    sub_name = request.match_info["subscription"]
    text = (await request.text()).strip()
    body = json.loads(text) if text else None
    broker.check_namespace(name)
    targets = _targets(broker, name) if broker.topic_exists(name) else [name]
    created = 0
    for target in targets:
        topic = broker.topic(target)
        if sub_name in topic.subscriptions:
            continue
        start = _reset_position(body, len(topic.entries))
        topic.subscription(sub_name, SHARED, durable=True, start=start)
        created += 1
    if created == 0:
        raise Conflict("Subscription already exists for topic")
    return web.Response(status=204)


async def delete_subscription(request: web.Request) -> web.Response:
    """`deleteSubscription` without `force`: refused (412) while consumers are connected."""
    broker = _broker(request)
    sub_name = request.match_info["subscription"]
    found = False
    for target in _targets(broker, _topic_name(request)):
        topic = broker.topics.get(target.full)
        sub = topic.subscriptions.get(sub_name) if topic is not None else None
        if sub is None:
            continue
        if sub.consumers:
            raise PreconditionFailed("Subscription has active connected consumers")
        found = True
    if not found:
        raise KeyError("Subscription not found")
    for target in _targets(broker, _topic_name(request)):
        topic = broker.topics.get(target.full)
        if topic is not None:
            topic.delete_subscription(sub_name)
    return web.Response(status=204)


def _policy_getter(key: str) -> Route:
    async def get_policy(request: web.Request) -> web.Response:
        """A topic-level policy as set; 204 with no body when it is not set (Pulsar resumes
        the request with null)."""
        broker = _broker(request)
        name = _topic_name(request)
        if name.partition_index >= 0:
            raise PreconditionFailed("Not allowed to set/get topic policy for a partition")
        _targets(broker, name)
        value = broker.topic_policy(name, key)
        return web.Response(status=204) if value is None else web.json_response(value)

    return get_policy


def _retention(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError("expected a RetentionPolicies object")
    minutes, size = body.get("retentionTimeInMinutes", 0), body.get("retentionSizeInMB", 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= -1 for v in (minutes, size)):
        raise ValueError("retentionTimeInMinutes and retentionSizeInMB must be integers >= -1")
    return {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size}


_DELETE_MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")


def _inactive_policies(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError("expected an InactiveTopicPolicies object")
    mode = body.get("inactiveTopicDeleteMode", _DELETE_MODES[0])
    seconds = body.get("maxInactiveDurationSeconds", 60)
    delete = body.get("deleteWhileInactive", True)
    if mode not in _DELETE_MODES:
        raise ValueError(f"inactiveTopicDeleteMode must be one of {', '.join(_DELETE_MODES)}")
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not isinstance(delete, bool):
        raise ValueError("maxInactiveDurationSeconds is an integer, deleteWhileInactive a bool")
    return {
        "inactiveTopicDeleteMode": mode,
        "maxInactiveDurationSeconds": seconds,
        "deleteWhileInactive": delete,
    }


def _policy_setter(key: str, parse: Callable[[Any], dict[str, Any]]) -> Route:
    async def set_policy(request: web.Request) -> web.Response:
        text = (await request.text()).strip()
        value = parse(json.loads(text) if text else None)
        _broker(request).set_topic_policy(_topic_name(request), key, value)
        return web.Response(status=204)

    return set_policy


async def unload(request: web.Request) -> web.Response:
    _broker(request).unload(_topic_name(request))
    return web.Response(status=204)


async def create_namespace(request: web.Request) -> web.Response:
    m = request.match_info
    _broker(request).create_namespace(f"{m['tenant']}/{m['namespace']}")
    return web.Response(status=204)


async def list_namespaces(request: web.Request) -> web.Response:
    tenant = request.match_info["tenant"]
    found = sorted(ns for ns in _broker(request).namespaces if ns.split("/")[0] == tenant)
    return web.json_response(found)


async def set_deduplication(request: web.Request) -> web.Response:
    m = request.match_info
    enabled = json.loads((await request.text()).strip())
    if not isinstance(enabled, bool):
        raise ValueError("expected true or false")
    _broker(request).set_deduplication(f"{m['tenant']}/{m['namespace']}", enabled)
    return web.Response(status=204)


async def get_deduplication(request: web.Request) -> web.Response:
    m = request.match_info
    ns = f"{m['tenant']}/{m['namespace']}"
    if ns not in _broker(request).namespaces:
        raise UnknownNamespace(f"namespace {ns} does not exist")
    return web.json_response(_broker(request).deduplication_enabled(ns))


async def clusters(_request: web.Request) -> web.Response:
    return web.json_response(["standalone"])


async def _json(request: web.Request) -> dict[str, Any]:
    text = await request.text()
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


async def fault(request: web.Request) -> web.Response:
    """POST /admin/devstack/faults/{name} with a JSON body of keyword arguments."""
    server = request.app[SERVER_KEY]
    faults = server.broker.faults
    args = await _json(request)
    name = request.match_info["name"]
    if name == "fail-sends":
        faults.fail_sends(**args)
    elif name == "delay-sends":
        faults.delay_sends(**args)
    elif name == "refuse-producers":
        faults.refuse_producers(**args)
    elif name == "pause-dispatch":
        faults.dispatch_paused = True
    elif name == "resume-dispatch":
        server.broker.resume_dispatch()
    elif name == "clear":
        faults.clear()
        server.broker.resume_dispatch()
    else:
        raise KeyError(f"unknown fault {name}")
    return web.Response(status=204)


async def drop_connections(request: web.Request) -> web.Response:
    dropped = _broker(request).drop_connections()
    return web.json_response({"dropped": dropped})


async def reset(request: web.Request) -> web.Response:
    _broker(request).reset()
    return web.Response(status=204)


async def restart(request: web.Request) -> web.Response:
    await request.app[SERVER_KEY].restart_broker()
    return web.Response(status=204)


def make_app(server: AdminTarget) -> web.Application:
    app = web.Application(middlewares=[_authentication, _errors])
    app[SERVER_KEY] = server
    app.add_routes(
        [
            web.get("/admin/v2/clusters", clusters),
            web.put("/admin/v2/namespaces/{tenant}/{namespace}", create_namespace),
            web.get("/admin/v2/namespaces/{tenant}", list_namespaces),
            web.post("/admin/v2/namespaces/{tenant}/{namespace}/deduplication", set_deduplication),
            web.get("/admin/v2/namespaces/{tenant}/{namespace}/deduplication", get_deduplication),
            web.get(NAMESPACE, list_topics),
            web.get(NAMESPACE + "/partitioned", list_partitioned),
            web.put(TOPIC, create_topic),
            web.put(TOPIC + "/partitions", create_partitioned),
            web.get(TOPIC + "/partitions", get_partitions),
            web.get(TOPIC + "/stats", get_stats),
            web.get(TOPIC + "/partitioned-stats", get_partitioned_stats),
            web.put(TOPIC + "/unload", unload),
            web.get(TOPIC + "/subscriptions", list_subscriptions),
            web.put(TOPIC + "/subscription/{subscription}", create_subscription),
            web.delete(TOPIC + "/subscription/{subscription}", delete_subscription),
            web.get(TOPIC + "/retention", _policy_getter(RETENTION)),
            web.post(TOPIC + "/retention", _policy_setter(RETENTION, _retention)),
            web.get(TOPIC + "/inactiveTopicPolicies", _policy_getter(INACTIVE_TOPIC_POLICIES)),
            web.post(
                TOPIC + "/inactiveTopicPolicies",
                _policy_setter(INACTIVE_TOPIC_POLICIES, _inactive_policies),
            ),
            web.post("/admin/devstack/faults/{name}", fault),
            web.post("/admin/devstack/drop-connections", drop_connections),
            web.post("/admin/devstack/reset", reset),
            web.post("/admin/devstack/restart", restart),
        ]
    )
    return app
