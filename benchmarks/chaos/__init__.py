"""Fault campaign on the devstack's real processes, checked for S1, S2 and L1.

Short seeded runs of the load test's workload on one shared ZooKeeper, S3 and broker, with
kills, restarts, outages and hostile messages; see docs/chaos.md."""
