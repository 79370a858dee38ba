"""User-level privacy (paper 002 §8, docs/host-level.md): a host, with all its packets in an epoch,
is the unit protected. PAMG over per-host distinct sets released by the Gaussian sparse histogram
mechanism, the m-scaled Misra-Gries variant, and the exact distinct-users baseline."""
