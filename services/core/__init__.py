"""What every Tombstone service shares: config, logging, errors, the gRPC bootstrap, metrics.

Modules: `config` (settings from `TOMBSTONE_*`), `logging` (structlog), `errors` (the error
root), `grpc_server` (`ServiceRunner`), `client` (calls between services), `validation`,
`metrics`, `tasks`.
"""
