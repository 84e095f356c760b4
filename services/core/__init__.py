"""What every Tombstone service shares: config, logging, errors, the gRPC bootstrap, metrics."""
