"""The fault campaign: short seeded runs of the load test's workload on the devstack's real
processes, with crashes, restarts, outages and hostile messages, each checked for S1, S2 and
L1 against ZooKeeper and S3."""
