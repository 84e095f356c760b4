"""The simulation's tests: replay, a slice of seeds, the mutant hunt, and the in-memory parts
checked against the real ZooKeeper and moto (fixtures of tests/conftest.py)."""
