"""The embedded local stack: real ZooKeeper and S3 servers, a wire-compatible Pulsar broker,
and a simulator that writes a realistic Pulsar cluster into them."""
