"""Human-readable figures about a model: what the simulator created and planted."""

from __future__ import annotations

from collections import Counter

from devstack.simulator.model import ClusterModel


def per_namespace(model: ClusterModel) -> dict[str, Counter[str]]:
    """Per `tenant/ns`: topics (MLs), ledgers in BookKeeper, offloaded ledgers, cursors."""
    table: dict[str, Counter[str]] = {}
    for ml in model.managed_ledgers.values():
        row = table.setdefault(_namespace(ml.name), Counter())
        row["managed_ledgers"] += 1
        row["listed"] += len(ml.ledgers)
        row["offloaded"] += sum(1 for info in ml.ledgers if info.offload)
    for ledger in model.ledgers.values():
        if ledger.owner and ledger.in_bookkeeper and ledger.kind.value != "schema":
            table.setdefault(_namespace(ledger.owner), Counter())["in_bookkeeper"] += 1
    for ml_name, _ in model.cursors:
        table.setdefault(_namespace(ml_name), Counter())["cursors"] += 1
    return dict(sorted(table.items()))


def _namespace(ml_name: str) -> str:
    return "/".join(ml_name.split("/")[:2])


def planted_counts(model: ClusterModel) -> Counter[str]:
    return Counter(p.kind.value for p in model.planted)


def render(model: ClusterModel) -> str:
    """A few lines: headline counts, then per namespace, then the planted orphans."""
    lines = ["Cluster:"]
    lines += [f"  {key:<24} {value}" for key, value in model.counts().items()]
    lines.append("Per namespace (MLs / listed / in BK / offloaded / cursors):")
    for ns, row in per_namespace(model).items():
        figures = " / ".join(
            str(row[k])
            for k in ("managed_ledgers", "listed", "in_bookkeeper", "offloaded", "cursors")
        )
        lines.append(f"  {ns:<24} {figures}")
    lines.append("Planted (deletable ones marked *):")
    for kind, count in sorted(planted_counts(model).items()):
        deletable = any(p.deletable for p in model.planted if p.kind.value == kind)
        lines.append(f"  {kind:<24} {count}{' *' if deletable else ''}")
    return "\n".join(lines)
