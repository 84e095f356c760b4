"""Admin HTTP: a few of Pulsar's `/admin/v2` paths, plus `/admin/devstack/...` for tests."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .broker import Broker, Conflict, UnknownNamespace
from .names import InvalidTopicName, TopicName
from .stats import partitioned_stats, topic_stats

if TYPE_CHECKING:
    from .server import BrokerServer

SERVER_KEY: web.AppKey[BrokerServer] = web.AppKey("server")
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
    except (ValueError, TypeError, InvalidTopicName) as exc:
        return _error(400, str(exc))


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


def make_app(server: BrokerServer) -> web.Application:
    app = web.Application(middlewares=[_errors])
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
            web.post("/admin/devstack/faults/{name}", fault),
            web.post("/admin/devstack/drop-connections", drop_connections),
            web.post("/admin/devstack/reset", reset),
            web.post("/admin/devstack/restart", restart),
        ]
    )
    return app
