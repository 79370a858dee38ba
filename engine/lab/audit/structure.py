"""White-box audit: the neighbouring-summary structure that a private release's proof rests on.

A black-box audit only sees outputs. Some bugs break a proof's premise while the output-level
leak stays below what a feasible number of runs can see — e.g. a SpaceSaving tie rule that leaves
three isolated labels per side instead of two: each is suppressed by the DPSS threshold with
probability 1 − O(δ), so the release drifts past δ by a constant factor only. For deterministic
summaries the premise itself is checkable on the pair, so the audit checks it too.
"""
from __future__ import annotations


def corollary1_violations(C: dict, Cp: dict, K: int, t: int) -> list[str]:
    """(I1)–(I5) of docs/dpss-eehh.md §2.6 for SpaceSaving summaries C = SS(X[:t]) and
    Cp = SS(X'[:t−1]) with K counters (X' is X without one element)."""
    bad = []
    mn = min(C.values()) if len(C) == K else 0
    mnp = min(Cp.values()) if len(Cp) == K else 0
    only, only_p = set(C) - set(Cp), set(Cp) - set(C)
    if len(only) > 2 or len(only_p) > 2:
        bad.append(f"I1: {len(only)} / {len(only_p)} isolated labels")
    if any(C[a] > mn + 1 for a in only):
        bad.append("I2: isolated label of X above min C + 1")
    if any(Cp[a] > mnp for a in only_p):
        bad.append("I3: isolated label of X' above min C'")
    diffs = [C[a] - Cp[a] for a in set(C) & set(Cp)]
    if any(d not in (0, 1) for d in diffs) or sum(diffs) > 1:
        bad.append(f"I4: shared differences {sorted(set(diffs))}, {sum(diffs)} of them 1")
    if sum(C.values()) != t or sum(Cp.values()) != t - 1:
        bad.append("I5: counter sums")
    return bad
