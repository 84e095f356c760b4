"""Service-level load test: simulated brokers create and trim ledgers through the marker while
the deleter pool deletes them; figures, a backlog plot, and a final S1/L1 check.

`.venv/bin/python -m benchmarks.load --help`; results in `docs/load-test.md`.
"""
