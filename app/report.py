"""What ``dptop replay`` and ``dptop capture`` print at the end, rendered from the run's JSON
(dptop.monitor.result) alone, read once into typed objects (dptop.runresult): ``--format table``
(the default) or ``csv``.

The table, in the order an operator reads it: the source and what was counted; the exact top once
(NOT private, the whole stream); per private algorithm its guarantee, then its last releases, each
labelled with its epoch, window or horizon in the units it counts and laid out in aligned columns
(rank, key, private estimate, its a-priori error, the exact count over the same packets and that
count's share of them), with one line summing up the earlier releases; the non-private baselines
only when asked for (``--baselines``); the privacy budget; and one status block with the
operational figures (rates, busy share, drops), which are exact and not private.
"""
from __future__ import annotations

import csv
import io
import textwrap
import time
from collections import Counter

from dptop.engine.core.keykinds import KeyKind
from dptop.engine.core.release import Span
from dptop.runresult import Counting, Lane, RunResult, ShownRelease, Truth

SHOWN_EPOCHS = 3
"""Releases of time or packet epochs shown in full per algorithm (the rest summed up in one line);
every other kind of release (a window, a prefix, the whole stream) shows its last one."""
EXACT_TOP = 10
KEY_COLUMN = {"src": "source", "dst": "destination", "dport": "port", "proto": "protocol", "pair": "pair",
              "src/24": "source net", "src/16": "source net", "dst/24": "dest. net", "dst/16": "dest. net"}
KEY_NOUN = {"src": "source", "dst": "destination", "dport": "port", "proto": "protocol", "pair": "address pair",
            "src/24": "source network", "src/16": "source network", "dst/24": "destination network",
            "dst/16": "destination network"}
EMPTY = "-"
WIDTH = 100  # the guarantee's lines wrap here (tables are as wide as their cells)


def units_of(counting: Counting) -> str:
    """The units the algorithms count: ``packets`` or ``64-byte units``."""
    if counting.in_bytes:
        return f"{counting.unit}-byte units"
    return "packets"


def measure_of(counting: Counting) -> str:
    """What an estimate is in: packets, or bytes (byte units times the unit)."""
    return "bytes" if counting.in_bytes else "packets"


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


def span_text(span: Span, units: str) -> str:
    """A release's span in the units it counts: ``epoch 3, 12:00:30-12:00:40 UTC``, ``epoch 3:
    packets 30,000-40,000``, ``the last 100,000 packets``, ``packets 0-4,412 since the start``,
    ``the whole stream``."""
    kind, index, start, end = span.kind, span.index, span.start, span.end
    timed = span.t_start is not None and span.t_end is not None
    if kind != "epoch" and (start is None or end is None):  # positions counted from the data, not shown
        return counted_span_text(span, timed)
    if kind == "epoch":
        if timed:
            return f"epoch {index}, {clock(span.t_start)}-{clock(span.t_end)} UTC"
        return f"epoch {index}: {units} {start:,}-{end:,}"
    if kind == "window":
        return f"the last {end - start:,} {units} ({units} {start:,}-{end:,} of the stream)"
    if kind == "prefix":
        return f"{units} {start:,}-{end:,} since the start" + (f", up to {clock(span.t_end)} UTC" if timed else "")
    if kind == "horizon":
        return f"horizon {index}: {units} {start:,}-{end:,}"
    if kind == "stream":
        return "the whole stream (one release at its end)"
    return kind


def counted_span_text(span: Span, timed: bool) -> str:
    """A continual or window span whose packet positions stay in ``exact_spans`` (a live lane; its
    ``start``/``end`` read None): ``horizon 0, 12:00:00-12:10:00 UTC``, ``the current window, up to
    12:00:40 UTC``."""
    where = {"horizon": f"horizon {span.index}", "prefix": "since the start",
             "window": "the current window"}.get(span.kind, span.kind)
    if not timed:
        return where
    if span.kind == "window":
        return f"{where}, up to {clock(span.t_end)} UTC"
    return f"{where}, {clock(span.t_start)}-{clock(span.t_end)} UTC"


def number(x: float | None) -> str:
    return EMPTY if x is None else f"{x:,.0f}"


def percent(part: float | None, whole: float | None) -> str:
    return EMPTY if part is None or not whole else f"{100 * part / whole:.1f} %"


def si(n: float) -> str:
    """12345678 -> '12.3M'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


def aligned(header: list[str], rows: list[list[str]], left: tuple[int, ...] = (1,), indent: str = "  ") -> list[str]:
    """Columns as wide as their widest cell, two spaces apart; the ``left`` columns (names, keys)
    flush left, the others (numbers) flush right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        text = "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return indent + text.rstrip()
    return [line(header), *(line(r) for r in rows)]


def key_noun(key: str) -> str:
    """The counted key kind in a word or two, as a hint says it: ``a 30 % destination``."""
    return KEY_NOUN.get(key, "key")


def key_column(counting: Counting) -> str:
    return KEY_COLUMN.get(counting.key, "key")


def key_label(counting: Counting) -> str:
    return KeyKind(counting.key).label


def empty_reason(lane: Lane) -> str:
    """Why a private panel is empty, from public figures only (its parameters and limits)."""
    limit = lane.status.detectable
    if limit is not None and limit.note:
        return str(limit.note)
    if limit is not None and limit.count:
        return (f"a key needs >= {limit.count:,.0f} counted units ({100 * limit.share:.1f} %) in "
                f"{limit.over} to be released with probability 0.9")
    return lane.status.note


def a_priori_error(lane: Lane, scale: int) -> float | None:
    """The estimate's a-priori error (probability 0.9) at the detection limit, in the shown measure."""
    limit = lane.status.detectable
    return None if limit is None or limit.error is None else limit.error * scale


def shown(lane: Lane) -> list[int]:
    """Indexes of the releases shown in full: the last few epochs, else the last release."""
    releases = lane.releases
    if not releases:
        return []
    last = SHOWN_EPOCHS if releases[-1].span.kind == "epoch" else 1
    return list(range(max(0, len(releases) - last), len(releases)))


def release_rows(lane: Lane, index: int, scale: int) -> tuple[list[list[str]], Truth | None]:
    """Rows (rank, key, private, ± a priori, exact, share) of release ``index`` and its truth."""
    release = lane.releases[index]
    truth = lane.truth_of(index)
    counts = (truth.counts if truth is not None else None) or [None] * len(release.items)
    packets = None if truth is None else truth.packets
    error = a_priori_error(lane, scale)
    rows = [[str(rank), item.address, number(item.estimate), EMPTY if error is None else f"±{error:,.0f}",
             number(count), percent(count, packets)]
            for rank, (item, count) in enumerate(zip(release.items, counts), 1)]
    return rows, truth


def summary_line(releases: tuple[ShownRelease, ...], upto: int) -> str:
    """One line for the releases before ``upto``: how many, over what, which keys came up most."""
    earlier = releases[:upto]
    if not earlier:
        return ""
    first, last = earlier[0].span, earlier[-1].span
    if first.kind == "epoch":
        what = f"epochs {first.index}-{last.index}" if len(earlier) > 1 else f"epoch {first.index}"
        what += f": {len(earlier)} release{'s' if len(earlier) > 1 else ''}"
    else:
        what = f"{len(earlier)} release{'s' if len(earlier) > 1 else ''} before the last"
    often = Counter(item.address for r in earlier for item in r.items)
    with_items = sum(1 for r in earlier if r.items)
    top = ", ".join(f"{a} in {n}" for a, n in often.most_common(3))
    return (f"  earlier, {what}, {with_items} with a key above the threshold"
            + (f"; most often released: {top}" if top else "") + " (each one in the JSON)")


def private_block(name: str, lane: Lane, counting: Counting, scale: int) -> list[str]:
    units, measure = units_of(counting), measure_of(counting)
    out = textwrap.wrap(f"{name}: {lane.guarantee or ''}", WIDTH, subsequent_indent="    ", break_on_hyphens=False)
    releases = lane.releases
    indexes = shown(lane)
    if not indexes:
        why = empty_reason(lane)
        return [*out, "  nothing released" + (f": {why}" if why else "")]
    summary = summary_line(releases, indexes[0])
    if summary:
        out.append(summary)
    for i in indexes:
        release = releases[i]
        rows, truth = release_rows(lane, i, scale)
        threshold = "" if release.threshold is None else f", threshold {release.threshold:,.0f} {measure}"
        span = f"{span_text(release.span, units)}{threshold}"
        if truth is not None and truth.packets is not None:
            span += f"; exact over the same {units}: {truth.packets // scale:,}"
            if truth.unseen:
                span += f" (its queue refused {truth.unseen // scale:,} more)"
        out.append(f"  {span}")
        if not rows:
            out.append("    nothing above the threshold")
            continue
        out += aligned(["rank", key_column(counting), f"private {measure}", "± a priori", "exact", "share"], rows,
                       indent="    ")
        if truth is not None and truth.note:
            out.append(f"    (exact counts unknown: {truth.note})")
    return out


def exact_block(result: RunResult, counting: Counting) -> list[str]:
    """The exact top once (NOT private); in bytes beside the count as the algorithms count it."""
    exact = result.exact
    label = key_label(counting)
    if not exact.total:
        return [f"exact top (NOT private): nothing counted: no packet carried a {label}"]
    measure = measure_of(counting)
    top = exact.top[:EXACT_TOP]
    distinct = f", {exact.distinct:,} distinct" if exact.distinct is not None else ""
    head = [f"exact top (NOT private), the whole stream: {exact.total:,} {measure}{distinct}"]
    counted = {}
    lane = result.algorithms.get("exact")
    if measure == "bytes" and lane is not None and lane.releases:
        counted = {it.address: it.estimate for it in lane.releases[-1].items}
    rows = []
    for rank, (address, count) in enumerate(top, 1):
        row = [str(rank), address, number(count), percent(count, exact.total)]
        if counted:
            row.insert(3, number(counted.get(address)))
        rows.append(row)
    header = ["rank", key_column(counting), measure, "share"]
    if counted:
        header.insert(3, "as counted")
        head.append(f"  ('{measure}' on the wire; 'as counted': what the algorithms count, {units_of(counting)} "
                    f"of at most {counting.cap} per packet, times {counting.unit})")
    return head + aligned(header, rows)


def baseline_block(name: str, lane: Lane, counting: Counting) -> list[str]:
    releases = lane.releases
    out = [f"{name} (NOT private)"]
    if lane.error:
        return [*out, f"  error: {lane.error}"]
    if not releases:
        return [*out, "  nothing released"]
    rows = [[str(rank), it.address, number(it.estimate)] for rank, it in enumerate(releases[-1].items[:EXACT_TOP], 1)]
    return out + aligned(["rank", key_column(counting), "estimate"], rows)


def status_block(result: RunResult) -> list[str]:
    """Operational figures, exact and not private: the source, drops, each algorithm's rate."""
    src = result.source
    out = ["status (operational, exact, NOT private)"]
    line = f"  read {src.packets:,} packets, {src.ip_packets:,} with an IP address"
    skipped = sum(src.skipped.values())
    out.append(line + (f", {skipped:,} skipped" if skipped else ""))
    for reason, n in result.dropped.items():
        out.append(f"  dropped by the public clock: {n:,} {reason}")
    drops = result.drops
    if drops.total:
        out.append(f"  {drops.text()}")

    def missed(name: str) -> int:  # the packets offered that this lane did not see (the one drop account)
        loss = drops.lane(name)
        return 0 if loss is None else loss.missed

    rows = [[name, "private" if a.private else "not private", si(a.packets_per_second),
             f"{100 * a.busy_share:.0f} %", f"{missed(name):,}", str(a.releases_published)]
            for name, a in result.algorithms.items() if a.private is not None]
    if rows:
        out += aligned(["algorithm", "", "packets/s", "busy", "not seen", "releases"], rows, left=(0, 1))
    return out


def render_text(result: RunResult, baselines: bool = False) -> str:
    """The whole table (see the module's docstring)."""
    counting = result.counting
    scale = counting.scale
    missing = result.missing
    partial = "" if not result.partial else \
        f" (partial: {len(missing)} capture file(s) not covered)" if missing else " (partial: interrupted)"
    what = counting.text or "packets per source address"
    out = [f"{result.source.where}: {what}{partial}"]
    if result.seeded:
        out.append("seeded noise (--seed): the figures below are NOT private")
    if result.covered is not None:
        out.append(f"  covered: {', '.join(result.covered) or 'none'}"
                   + (f"; NOT covered: {', '.join(missing)}" if missing else ""))
    out += ["", *exact_block(result, counting)]
    for name, a in result.algorithms.items():
        if a.guarantee is None and a.error:
            out += ["", f"{name}: error: {a.error}"]
        elif a.private:
            out += ["", *private_block(name, a, counting, scale)]
        elif baselines and name != "exact" and a.private is not None:
            out += ["", *baseline_block(name, a, counting)]
    if result.budget:
        out += ["", f"privacy budget, all private algorithms together: {result.budget}"]
    out += ["", *status_block(result)]
    return "\n".join(out) + "\n"


CSV_COLUMNS = ("algorithm", "private", "span", "rank", "key", "estimate", "a_priori_error", "exact", "share")


def render_csv(result: RunResult, baselines: bool = False) -> str:
    """One row per key shown: the exact top (algorithm ``exact-top``) and each shown release."""
    counting = result.counting
    scale = counting.scale
    units = units_of(counting)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    total = result.exact.total
    for rank, (address, count) in enumerate(result.exact.top, 1):
        writer.writerow(["exact-top", "false", "the whole stream", rank, address, "", "", count,
                         f"{count / total:.6f}" if total else ""])
    for name, a in result.algorithms.items():
        if not a.private and not (baselines and a.private is False):
            continue
        error = a_priori_error(a, scale) if a.private else None
        for i in shown(a):
            release = a.releases[i]
            truth = a.truth_of(i) or Truth(i)
            counts = truth.counts or [None] * len(release.items)
            for rank, (item, count) in enumerate(zip(release.items, counts), 1):
                share = "" if count is None or not truth.packets else f"{count / truth.packets:.6f}"
                writer.writerow([name, "true" if a.private else "false", span_text(release.span, units),
                                 rank, item.address, f"{item.estimate:.0f}",
                                 "" if error is None else f"{error:.0f}", "" if count is None else count, share])
    return buf.getvalue()
