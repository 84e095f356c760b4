#!/usr/bin/env bash
# Installs everything the local stack and the tests need on a fresh Debian machine:
# the ZooKeeper server, a Java runtime, spin, promtool and headless Chromium (the reconciler
# report's test) from Debian, then a virtualenv with the project.
# Safe to run again: each step is skipped when it is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
command -v shellcheck >/dev/null 2>&1 || need_apt+=(shellcheck)
command -v spin >/dev/null 2>&1 || need_apt+=(spin)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "bootstrap: installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    if [[ " ${need_apt[*]} " == *" prometheus "* ]]; then
        # Only promtool is wanted (the rules' tests). Where an init system runs, Debian's
        # package starts a Prometheus server on port 9090: stop it and keep it off at boot.
        if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
            $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
        elif command -v service >/dev/null 2>&1; then
            $SUDO service prometheus stop >/dev/null 2>&1 || true
        fi
    fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv"
    "$PY" -m venv .venv
fi

# Reinstall only when the dependency list changed.
stamp=.venv/.bootstrap-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "bootstrap: installing Python packages into .venv"
    .venv/bin/pip install -q --upgrade pip >/dev/null
    .venv/bin/pip install -q -e '.[dev,spark]'
    echo "$want" > "$stamp"
fi

# The `oxia` client, without its declared dependencies: its wheel requires an unpinned
# `betterproto2-compiler`, whose releases conflict with our ruff pin (see pyproject.toml,
# which lists what the client needs at run time: grpcio, betterproto2==0.9.1, xxhash<4).
if ! .venv/bin/python -c 'import importlib.metadata as m; assert m.version("oxia") == "0.2.1"' 2>/dev/null; then
    echo "bootstrap: installing the oxia client (without its build-time dependencies)"
    .venv/bin/pip install -q --no-deps oxia==0.2.1
fi
