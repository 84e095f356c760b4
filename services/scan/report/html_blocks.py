"""Small HTML building blocks for the report (escaping done here, once)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

CSS = """
body{font-family:sans-serif;margin:1.5em 2em;color:#222;max-width:1100px}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:2px 8px;
text-align:left;vertical-align:top} th{background:#f3f3f3} td.num{text-align:right}
.meta{color:#555} .banner{border:2px solid #b03030;background:#fdecea;padding:.6em 1em;
margin:1em 0} .verdict{font-size:1.15em;padding:.6em 1em;margin:1em 0;border-left:6px solid}
.verdict.refused{border-color:#b03030;background:#fdecea} .verdict.ok{border-color:#2a7a2a;
background:#eaf5ea} .verdict.submitted{border-color:#3b6ea8;background:#eaf0f8}
.yes{color:#2a7a2a;font-weight:bold} .no{color:#777} .bad{color:#b03030;font-weight:bold}
code{background:#f3f3f3;padding:0 3px;white-space:nowrap} svg{display:block;margin:.5em 0}
td.num{white-space:nowrap} table.items{font-size:.9em} table.items td:nth-child(2){
overflow-wrap:anywhere;min-width:7em;max-width:16em} table.items td:nth-child(6){min-width:20em}
"""


class Raw(str):
    """A cell that is already HTML (built with `text`/`escape`), inserted as is."""


Cell = str | int | float | None


def text(value: Cell) -> str:
    if isinstance(value, Raw):
        return str(value)
    return "" if value is None else escape(str(value))


def mark(value: str, cls: str) -> Raw:
    return Raw(f"<span class='{cls}'>{escape(value)}</span>")


def para(body: str, cls: str = "") -> str:
    attr = f" class='{cls}'" if cls else ""
    return f"<p{attr}>{body}</p>"


def bullets(items: Iterable[str]) -> str:
    """A list of already-escaped HTML fragments."""
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    *,
    numeric: Sequence[int] = (),
    cls: str = "",
    row_class: str = "",
) -> str:
    """A table of plain values (escaped); columns in `numeric` align right."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f"<td class='num'>{text(v)}</td>" if i in numeric else f"<td>{text(v)}</td>"
            for i, v in enumerate(row)
        )
        attr = f" class='{row_class}'" if row_class else ""
        body.append(f"<tr{attr}>{cells}</tr>")
    attr = f" class='{cls}'" if cls else ""
    return f"<table{attr}><tr>{head}</tr>{''.join(body)}</table>"


def section(ident: str, title: str, *parts: str) -> str:
    return f"<section id='{ident}'><h2>{escape(title)}</h2>{''.join(parts)}</section>"


def page(title: str, *parts: str) -> str:
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        + "".join(parts)
        + "</body></html>\n"
    )
