"""The analysis: classify an extract, decide whether it can be trusted, propose candidates.

In: an extract run directory (`services.scan.schema`) and `config.AnalyzeConfig`. Out, in
the run folder: findings for every ledger and offloaded object, the deletion candidates
(none when `safety` refuses the run), insights (counts, reclaimable bytes, dormant topics,
inactive cursors), items.csv and tasks.csv, and the summary that `services.scan.report`
writes and draws. `job` runs the steps in order and does the writing.
"""
