"""The report: summary.json and the self-contained report.html drawn from it, without Spark.

In: the analysis's summary, after a submit its record (submitted.json), and the previous
complete run under the same `--out` (`history`) for what changed. Out: summary.json and
report.html in the run folder (`write`; `write_html_report(run_dir)` draws it again from
the folder alone). The other modules are its sections and how it writes numbers and HTML.
"""
