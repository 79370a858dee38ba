"""ldp-dsr-prefix: DSR per level of the IPv4 prefix tree, /8 first, each level over the children of
the hottest prefixes above: a search 003 does not give, designed here (docs/local-dp.md §10.3). The
search itself is ``prefix.PrefixSearch``; the options, windows and releases are in ``scheme``."""
from __future__ import annotations

import numpy as np

from dptop.engine.core.keys import IPV4_MAPPED
from dptop.engine.core.registry import register
from dptop.engine.core.release import ReleasedItem
from dptop.engine.core.settings import check_positive_int
from dptop.engine.local_dp.domain import ipv4_of_keys
from dptop.engine.local_dp.prefix import PrefixSearch, level_budget, parse_levels
from dptop.engine.local_dp.scheme import LocalDP

PREFIX_LEVELS = "8,12,16,20,24,28,32"
"""ldp-dsr-prefix's default levels of the IPv4 prefix tree (``--param levels``)."""


@register
class LDPDSRPrefix(LocalDP):
    """DSR per level of the IPv4 prefix tree, /8 then extending hot prefixes: full addresses, epsilon-LDP per report."""

    name = "ldp-dsr-prefix"
    scheme = "prefix"
    parameters = ("reports", "snapshot", "ed", "alpha", "levels", "fanout")

    @classmethod
    def pipelines(cls, extra: dict) -> int:
        """One per level of the prefix tree."""
        return len(parse_levels(extra.get("levels", PREFIX_LEVELS)))

    def _configure(self, extra: dict) -> None:
        self.levels = parse_levels(extra.get("levels", PREFIX_LEVELS))
        self.fanout = check_positive_int("fanout", extra.get("fanout", 2 * self.k))

    def _new_engine(self):
        return PrefixSearch(self.epsilon, self.heavy, self.fanout, self.every, self.levels, self.ed,
                            self.settings.seed)

    def _items(self, keys):
        out = np.empty(len(keys), np.int64)
        ipv4_of_keys(keys, out)
        return out

    def _label(self, item, estimate):
        bits = self.levels[-1]
        return ReleasedItem(0, IPV4_MAPPED | (int(item) << (32 - bits)), estimate, None if bits == 32 else 96 + bits)

    def notes(self):
        L = len(self.levels)
        return (f"prefix extension over IPv4 /{', /'.join(map(str, self.levels))}: level 1 over the 256 /8s, "
                f"each further level over the children of the {self.fanout} hottest prefixes above; DSR with "
                f"λ_h = {self.heavy} cells per level",
                f"budget split across levels: report i goes to level i mod {L} (public schedule), so each level "
                f"gets 1/{L} of an agent's reports (ε_window/{L}"
                + ("" if self.reports_cap is None else
                   f" = {level_budget(self.epsilon * self.reports_cap, L):.4g}")
                + f") at the full ε per report; estimates are scaled by {L}",
                "IPv6 sources are reported as 'other' (the prefix tree is IPv4)")
