"""`--submit`: the candidates sent to the marker as RECONCILER MarkLedgers requests.

In: a run folder's candidates, `send.SubmitSettings` (the marker, the rate, the concurrency,
the batch) and, with `--plan`, an earlier dry run that bounds what is sent (`plan`). Out:
the MarkLedgers calls, and submitted.json in the run folder (the report is drawn again with
it). The marker, the verifier and the deleters still check each ledger: a submission
proposes, it never deletes.
"""
