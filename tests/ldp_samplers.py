"""A numba loop that counts successes of the exact Bernoulli samplers (tests L4 and L5)."""
import numba

from dptop.engine.local_dp.entropy import bern_exp
from dptop.engine.local_dp.heavyguardian import ed_fires

BERN_EXP, ED = 0, 1


@numba.njit(cache=True)
def count_hits(sampler, a, b, n, words, pos):
    """Successes in ``n`` draws of bern_exp(a/b) (``BERN_EXP``) or ed_fires(count a, rule b)."""
    hits = 0
    for _ in range(n):
        hits += bern_exp(words, pos, a, b) if sampler == BERN_EXP else ed_fires(words, pos, a, b)
    return hits
