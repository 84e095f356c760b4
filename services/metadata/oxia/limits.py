"""What Oxia accepts and what the adapter defaults to, without importing the `oxia` client:
callers check settings against these before they need the client."""

DEFAULT_MAX_THREADS = 16
MIN_SESSION_TIMEOUT = 2.0
MAX_SESSION_TIMEOUT = 300.0
"""The session timeouts Oxia accepts (`common/constant/constants.go`)."""
CLIENT_RELEASE = "0.2.1"
"""The `oxia` client release the adapter is written against (it reaches into its internals)."""
