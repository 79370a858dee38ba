"""What the product conformance matrix (dptop.lab.product_matrix) reads of a run: the lines
``capture`` prints as features, the public facts a view names, a seeded run's markers; and how it
compares the runs of the two sides (fields that split them, public facts that explain a split).
"""
from __future__ import annotations

import re

from dptop.lab.product_audit import view_features


ITEMS = re.compile(r"(?:\S+ -?[\d,]+(?: · \S+ -?[\d,]+)*(?: \(\+\d+\))?|\(nothing above τ\))")
"""What a printed line (dptop.releaselines) ends with after ``: ``: its labels and estimates."""
HEAD = re.compile(r"^(?P<clock>\S+) (?P<name>\S+) (?P<where>.*?)(?:, τ (?P<threshold>-?[\d,.]+))?$")


def parse_line(line: str):
    """(clock, name, span, threshold, items) of a printed line; the items start after the first
    ``: `` whatever follows which is a list of labels and estimates (a span may hold ``: ``)."""
    at = -1
    while (at := line.find(": ", at + 1)) >= 0:
        head, items = HEAD.match(line[:at]), line[at + 2:]
        if head is not None and ITEMS.fullmatch(items):
            return head["clock"], head["name"], head["where"], head["threshold"], items
    return None


def line_features(text: str) -> dict[str, float]:
    """The lines ``capture`` printed as features: per algorithm the number of lines, per line its
    leading clock and span as a category, its threshold and each label's estimate as values."""
    out: dict[str, float] = {}
    count: dict[str, int] = {}
    for line in text.splitlines():
        parsed = parse_line(line)
        if parsed is None:
            out[f"unparsed={line}"] = 1.0
            continue
        clock, name, where, threshold, items = parsed
        i = count[name] = count.get(name, 0) + 1
        out[f"{name} line {i}: {clock} {where}"] = 1.0
        if threshold is not None:
            out[f"{name} line {i} threshold"] = float(threshold.replace(",", ""))
        for item in items.split(" · "):
            label, _, estimate = item.rpartition(" ")
            if label and estimate.lstrip("-").replace(",", "").isdigit():
                out[f"{name} line {i} item {label}"] = float(estimate.replace(",", ""))
    out.update({f"{name} lines": float(n) for name, n in count.items()})
    return out


def stated_facts(view: dict) -> dict[str, float]:
    """The public facts ``view`` names (its ``public_facts``), as features: what the feed serves at
    /releases beside /metrics, so that a series following a named fact is that fact's, not a leak."""
    return {k: v for k, v in view_features({"public_facts": view["public_facts"], "parameters": {}}).items()
            if k.startswith(".public_facts")}


def seeded_features(view: dict, metrics: dict[str, float]) -> dict[str, float]:
    """Whether every surface of a seeded run says NOT private: 1 per surface that does not."""
    unmarked = [k for k in metrics if "'private', 'false'" not in k and not k.startswith("dptop_not_private")]
    return {"view says private": float(view["private"]), "metrics series without NOT private": float(len(unmarked))}


def split_fields(xs: list[dict], ys: list[dict]) -> tuple[str, ...]:
    """Fields constant within each side (present in every run, one value) and different between
    the sides (or present on one side only, in every run of it)."""
    def constant(runs):
        keys = set.intersection(*(set(r) for r in runs))
        return {k: runs[0][k] for k in keys if all(r[k] == runs[0][k] for r in runs)}

    cx, cy = constant(xs), constant(ys)
    anywhere_x, anywhere_y = set().union(*xs), set().union(*ys)
    differ = {k for k in cx.keys() & cy.keys() if cx[k] != cy[k]}
    differ |= {k for k in cx.keys() - anywhere_y} | {k for k in cy.keys() - anywhere_x}
    return tuple(sorted(differ))


def named_facts(xs: list[dict], ys: list[dict]) -> tuple[str, ...]:
    """Public facts the view names whose values differ between the sides (by the fact's index in
    ``public_facts``, named by its ``name`` field)."""
    def facts(run):
        out: dict[str, set] = {}
        for k, v in run.items():
            if k.startswith(".public_facts["):
                out.setdefault(k.split("]")[0], set()).add((k, v))
        return out

    names = {}
    for run in xs + ys:
        for k in run:
            if k.startswith(".public_facts[") and ".name=" in k:
                names[k.split("]")[0]] = k.split(".name=")[1]
    fx, fy = [facts(r) for r in xs], [facts(r) for r in ys]
    return tuple(sorted({names.get(i, i) for i in names
                         if {frozenset(f.get(i, ())) for f in fx} != {frozenset(f.get(i, ())) for f in fy}}))
