"""The PySpark reconciler: finds orphaned ledgers and offloaded objects (docs/design.md §7).

One package per step, in the order a run takes them: `cli` (the `tombstone reconcile`
commands) → `preflight` → `extract` → `analysis` → `report` → `submit`. Shared by several
steps: `schema` (the extract contract, written by the extract and read by the analysis),
`spark` (the session) and `progress` (the bars on a terminal). docs/reconciler.md describes
each step.
"""
