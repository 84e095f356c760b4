"""A child for the launcher's tests: logs one JSON line (event `$STUBBORN_EVENT`, default
`started`), ignores SIGTERM, then sleeps (a minute at most, so a leaked one goes soon)."""

from __future__ import annotations

import json
import os
import signal
import time

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    event = os.environ.get("STUBBORN_EVENT", "started")
    print(json.dumps({"event": event, "port": 0}), flush=True)
    time.sleep(60)
