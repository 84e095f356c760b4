"""A child for the launcher's tests: logs one JSON line (event `$STUBBORN_EVENT`, default
`started`), ignores SIGTERM, then sleeps (a minute at most, so a leaked one goes soon).

It sets SIGINT's disposition itself: a child of a shell started in the background inherits
SIGINT as ignored, and Python then keeps it ignored instead of raising KeyboardInterrupt,
which the stop-signal test relies on."""

from __future__ import annotations

import json
import os
import signal
import time

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    event = os.environ.get("STUBBORN_EVENT", "started")
    print(json.dumps({"event": event, "port": 0}), flush=True)
    time.sleep(60)
