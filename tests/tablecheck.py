"""Reading ``dptop replay``/``capture`` tables back (dptop.report): every table found, its columns
checked to be aligned (a name column flush left, a number column flush right, both at the same
offsets on every row as in the header) and its rows returned as dicts."""
from __future__ import annotations

import re

RULE = re.compile(r"\S+(?: \S+)*")  # a cell: words separated by single spaces


def cells(line: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each cell (cells are at least two spaces apart)."""
    return [(m.start(), m.end(), m.group()) for m in RULE.finditer(line)]


def tables(text: str, first: str = "rank") -> list[dict]:
    """Every table whose header starts with ``first``: {"header", "rows", "title"} (the title: the
    nearest line above the header that is not part of a table). Asserts the columns align."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        head = cells(line)
        if not head or head[0][2] != first:
            continue
        indent = head[0][0]
        body = []
        for row in lines[i + 1:]:
            got = cells(row)
            if not got or len(got) != len(head) or got[0][1] != head[0][1]:
                break
            body.append(got)
        for got in body:
            for column, ((h0, h1, name), (c0, c1, value)) in enumerate(zip(head, got)):
                flush_left = c0 == h0
                flush_right = c1 == h1
                assert flush_left or flush_right, f"column {name!r} not aligned: {value!r} in {lines[i:]!r}"
                if column != 1 and re.fullmatch(r"[-±]?[\d,.]+( %)?|-", value):  # column 1: the key
                    assert flush_right, f"number {value!r} of column {name!r} is not flush right"
        title = next((lines[j] for j in range(i - 1, -1, -1)
                      if lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) < indent), "")
        found.append({"header": [c[2] for c in head], "title": title.strip(),
                      "rows": [dict(zip([c[2] for c in head], [c[2] for c in r])) for r in body]})
    return found


def number(text: str) -> float | None:
    return None if text == "-" else float(text.replace(",", "").replace("±", "").replace(" %", ""))
