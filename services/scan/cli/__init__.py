"""`tombstone reconcile extract | analyze | run`: the commands, their options, their runs.

In: the command line and the `TOMBSTONE_*` environment. Out: each step's settings
(`ExtractSettings`, `AnalyzeConfig`, `SubmitSettings`), the steps called in flow order
(pre-flight, extract, analysis and report, submit), each `analyze` and `run` in a run folder
of its own `OUT/<UTC time>/` (`runs`; `run_guard` for SIGINT), and the exit status.
`reconcile` holds the command group.
"""
