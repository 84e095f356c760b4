"""The PySpark reconciler: finds orphaned ledgers and offloaded objects (docs/design.md §7)."""
