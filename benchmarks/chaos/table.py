"""`python -m benchmarks.chaos.table RUNS.jsonl...`: the campaign's table in Markdown from the
records `--record` appended (one JSON line per run): one row per block of consecutive seeds,
then the totals."""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.chaos.faults import KINDS

SHORT = {kind: kind.replace("_", " ") for kind in KINDS}


def blocks(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Records grouped by runs of consecutive seeds (one campaign chunk each)."""
    out: list[list[dict[str, Any]]] = []
    for record in sorted(records, key=lambda r: r["seed"]):
        if out and record["seed"] == out[-1][-1]["seed"] + 1:
            out[-1].append(record)
        else:
            out.append([record])
    return out


def row(label: str, records: list[dict[str, Any]]) -> str:
    faults: collections.Counter[str] = collections.Counter()
    for record in records:
        faults.update(record["faults"])
    violations = sum(len(r["violations"]) for r in records)
    cells = [str(faults[kind]) for kind in KINDS]
    counts = [str(len(records)), str(sum(faults.values())), *cells, str(violations)]
    return f"| {label} | {' | '.join(counts)} |"


def table(records: list[dict[str, Any]]) -> str:
    head = f"| seeds | runs | faults | {' | '.join(SHORT[k] for k in KINDS)} | violations |"
    rule = "|" + "---|" * (len(KINDS) + 4)
    lines = [head, rule]
    for block in blocks(records):
        first, last = block[0]["seed"], block[-1]["seed"]
        lines.append(row(f"{first}–{last}" if last != first else str(first), block))
    lines.append(row("**total**", records))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    records = [
        json.loads(line)
        for path in argv
        for line in Path(path).read_text().splitlines()
        if line.strip()
    ]
    print(table(records))
    failing = sorted(r["seed"] for r in records if r["violations"])
    print(f"\nfailing seeds: {' '.join(map(str, failing)) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
