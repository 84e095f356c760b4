"""Deterministic simulation of the whole protocol (issue #13, docs/simulation.md).

The real marker, verifier and deleter modules run in one process on a virtual clock against
in-memory ZooKeeper, system topic and S3; one seeded scheduler draws the workload and every
fault, so a seed replays byte-identically.
"""
