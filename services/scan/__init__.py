"""The PySpark reconciler: finds orphaned ledgers and offloaded objects (DESIGN.md §7)."""
