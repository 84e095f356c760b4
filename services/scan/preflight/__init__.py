"""The pre-flight: what would make a run fail or lie, found in seconds, before any Spark work.

In: the extract's settings (`extract`, `run`) or an extract folder and `--cluster`
(`analyze`), and the `--out` folder. Out: one `problems.Problem` per problem (a line each
on stderr, exit 5, nothing written) and warnings (undeclared replication, no offload tier).
`checks` runs them; `zk`, `oxia`, `s3` and `sharing` check one source each (`tree`: what
ZooKeeper and Oxia are both checked for).
"""
