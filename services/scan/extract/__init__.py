"""The extract: the metadata stores (ZooKeeper or Oxia) and the allowed buckets, read as Spark
tasks, into Parquet.

In: `units.ExtractSettings` (metadata stores, cluster, buckets or S3 Inventory files) and a
Spark session. Out: an extract run directory, one Parquet dataset per table of the contract
(`services.scan.schema`), with one manifest row per task. `job` runs the Spark job, `units`
lists the work units and runs one, `tasks` are the readers and `rows` the rows they build;
`stores` opens a metadata-store session of either kind, `s3` is the S3 adapter, `inventory`
reads inventory files, `namespaces` the policies.
"""
