"""A simulated Pulsar cluster, written in the real formats into ZooKeeper and S3."""
