"""The typed privacy model (engine/privacy: measures, units, guarantee) against an independent
accountant, Google's dp-accounting (RDP with the CKS20 conversion, PLD), on a table of cases.

Stated precision: zCDP -> (ε, δ) within 1e-4 relative of the RDP accountant on a dense grid of
orders (the accountant's grid can only be looser: ours is never above it); pure composition
and group privacy within 1e-6 of the PLD accountant's ε at δ = 1e-12; (ε, δ) basic
composition never below the PLD's optimal δ at the summed ε and within Σ δ_i·δ_j of it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from dptop.engine.core import registry
from dptop.engine.core.settings import Counting, Settings
from dptop.engine.privacy import measures as m
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.units import KeyKind, Relation, Unit, UnitKind, in_relation, per_packet
from dptop.monitor.ledger import Ledger

dpa = pytest.importorskip("dp_accounting")
from dp_accounting import rdp  # noqa: E402
from dp_accounting.pld import common, privacy_loss_distribution as pld  # noqa: E402

ORDERS = list(np.concatenate([np.linspace(1.0005, 2, 2000), np.linspace(2, 400, 40000), np.geomspace(400, 1e6, 20000)]))


def rdp_epsilon(rhos, delta):
    acc = rdp.RdpAccountant(ORDERS)
    for rho in rhos:
        acc.compose(dpa.ZCDpEvent(rho))
    return acc.get_epsilon(delta)


def laplace_epsilon(epsilons):
    acc = dpa.pld.PLDAccountant()
    for e in epsilons:
        acc.compose(dpa.LaplaceDpEvent(1 / e))  # scale b = 1/ε at sensitivity 1
    return acc.get_epsilon(1e-12)


@pytest.mark.parametrize("rho,delta", [(0.0243560, 1e-6), (0.0174689, 1e-6), (0.001, 1e-9), (0.5, 1e-5),
                                       (2.0, 1e-3), (1e-5, 1e-6)])
def test_zcdp_to_approx_matches_rdp_accountant(rho, delta):
    ours, theirs = m.zcdp_epsilon(rho, delta), rdp_epsilon([rho], delta)
    assert ours <= theirs * (1 + 1e-9) and ours == pytest.approx(theirs, rel=1e-4)
    assert m.zcdp_delta(rho, ours) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-6), (0.5, 1e-6), (0.1, 3.16e-11), (2.0, 1e-9)])
def test_dpsw_calibration_states_the_requested_epsilon(epsilon, delta):
    """DPSW's ρ from (ε, δ) is tight: the accountant states exactly (ε, δ) for it; the old
    calibration is looser (at ε = 1, δ = 1e-6: ρ 0.0175 -> 0.0244, σ × 0.847)."""
    rho = m.zcdp_rho(epsilon, delta)
    assert rdp_epsilon([rho], delta) == pytest.approx(epsilon, rel=1e-4)
    assert rdp_epsilon([m.bun_steinke_rho(epsilon, delta)], delta) < epsilon
    g = registry.make("dpsw", Settings(epsilon=epsilon, delta=delta, seed=1)).guarantee()
    assert isinstance(g.cost, m.ZCDP) and g.rho == pytest.approx(rho) and g.epsilon == pytest.approx(epsilon)


@pytest.mark.parametrize("rhos", [(0.01, 0.02), (0.0243560, 0.0243560, 0.1), (0.5,)])
def test_zcdp_composition_matches_rdp_accountant(rhos):
    total = m.compose(m.ZCDP(r, 1e-6) for r in rhos)
    assert isinstance(total, m.ZCDP) and total.rho == pytest.approx(sum(rhos))
    assert m.zcdp_epsilon(total.rho, 1e-6) == pytest.approx(rdp_epsilon(rhos, 1e-6), rel=1e-4)


@pytest.mark.parametrize("size", [2, 3, 24])
def test_zcdp_group_matches_gaussian_sensitivity(size):
    """Neighbours `size` steps apart under a Gaussian of ρ: sensitivity `size`, ρ·size²."""
    acc = rdp.RdpAccountant(ORDERS)
    acc.compose(dpa.GaussianDpEvent(1 / math.sqrt(2 * 0.001) / size))
    assert m.group(m.ZCDP(0.001, 1e-6), size).epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-4)


@pytest.mark.parametrize("epsilons", [(0.5, 0.25), (0.1,) * 5, (1.0, 0.5, 0.0005)])
def test_pure_composition_matches_pld(epsilons):
    total = m.compose(m.PureDP(e) for e in epsilons)
    assert isinstance(total, m.PureDP) and total.epsilon == pytest.approx(laplace_epsilon(epsilons), abs=1e-6)


@pytest.mark.parametrize("size", [2, 24])
def test_pure_group_matches_laplace_sensitivity(size):
    acc = dpa.pld.PLDAccountant()
    acc.compose(dpa.LaplaceDpEvent(2 / size))  # ε = 0.5: scale 2 at Δ = 1; Δ = size is scale 2/size at Δ = 1
    assert m.group(m.PureDP(0.5), size).epsilon == pytest.approx(acc.get_epsilon(1e-12), abs=1e-6)


@pytest.mark.parametrize("costs", [((0.5, 1e-6), (0.25, 2e-6)), ((1.0, 1e-6), (1.0, 1e-6), (0.5, 1e-9)),
                                   ((0.5, 1e-6),) * 5])
def test_approx_composition_is_basic_and_sound(costs):
    total = m.compose(m.ApproxDP(e, d) for e, d in costs)
    dist = None
    for e, d in costs:
        p = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(e, d))
        dist = p if dist is None else dist.compose(p)
    optimal = dist.get_delta_for_epsilon(total.epsilon)
    cross = sum(a[1] * b[1] for i, a in enumerate(costs) for b in costs[i + 1:])
    assert total.epsilon == pytest.approx(sum(e for e, _ in costs))
    assert optimal <= total.delta * (1 + 1e-9) and total.delta - optimal <= cross + 1e-15


@pytest.mark.parametrize("epsilon,delta,size", [(0.5, 1e-6, 2), (0.5, 1e-6, 24), (1.0, 1e-9, 3), (0.0, 1e-6, 4)])
def test_approx_group_is_the_iterated_definition(epsilon, delta, size):
    """No accountant covers group privacy of (ε, δ); the reference iterates the definition:
    P0 <= e^ε P1 + δ <= ... gives δ_m = e^ε·δ_{m−1} + δ."""
    ref = 0.0
    for _ in range(size):
        ref = math.exp(epsilon) * ref + delta
    g = m.group(m.ApproxDP(epsilon, delta), size)
    assert (g.epsilon, g.delta) == (pytest.approx(size * epsilon), pytest.approx(ref, rel=1e-12))
    assert in_relation(m.ApproxDP(epsilon, delta), Relation.ADD_REMOVE, Relation.SUBSTITUTE) == \
        m.group(m.ApproxDP(epsilon, delta), 2)


@pytest.mark.parametrize("target", [m.ApproxDP(0.5, 1e-6), m.PureDP(1.0), m.ZCDP(0.0243560, 1e-6),
                                    m.ApproxDP(0.5, 6.3e-6)])
@pytest.mark.parametrize("size", [1, 2, 24])
def test_byte_calibration_round_trip(target, size):
    back = m.group(m.calibrate_group(target, size), size)
    assert back.epsilon == pytest.approx(target.epsilon, rel=1e-9)
    assert (back.delta or 0) == pytest.approx(target.delta or 0, rel=1e-9)


@pytest.mark.parametrize("name", ["dpss", "lazyhh", "dpsw", "dpmg", "eehh-cms"])
def test_bytes_guarantee_per_packet_equals_the_unweighted_one(name):
    """Calibrated per update, the per-packet guarantee in bytes is the unweighted run's."""
    from dptop.monitor.config import CountingChoice, RunConfig
    plain_config = RunConfig((name,), Settings(seed=1))
    byte_config = RunConfig((name,), Settings(seed=1), counting=CountingChoice(weight="bytes", cap=24))
    plain, byte = plain_config.settings_for(name), byte_config.settings_for(name)
    g0, g1 = plain_config.make(name).guarantee(), byte_config.make(name).guarantee()
    assert byte.epsilon < plain.epsilon
    assert g1.epsilon == pytest.approx(g0.epsilon, rel=1e-9) and (g1.delta or 0) == pytest.approx(g0.delta or 0, rel=1e-9)
    assert g1.unit.group == 24 and "24 updates" in " ".join(g1.notes)


def test_destination_key_names_the_destination():
    s = Settings(seed=1)
    for name in ("lazyhh", "dpsw"):
        g = registry.make(name, s, counting=Counting(KeyKind.DST)).guarantee()
        assert g.neighbouring == "substitution of one packet's destination address", name
    assert registry.make("dpsw", Settings(seed=1)).guarantee().neighbouring == "substitution of one packet's source address"


def test_per_packet_costs_of_other_units():
    host = m.ApproxDP(0.5, 1e-6)
    assert per_packet(host, Unit(UnitKind.HOST)) == host  # one packet changes one host's epoch
    assert per_packet(m.PureDP(0.0005), Unit(UnitKind.REPORT, reports=1000)).epsilon == pytest.approx(0.5)
    assert per_packet(m.PureDP(0.5), Unit(UnitKind.REPORT, reports=None)).epsilon == 0.5
    assert per_packet(m.PureDP(0.5), Unit(UnitKind.REPORT, reports=None, group=3)).epsilon == 1.5


def test_ledger_total_includes_every_lane_reading_the_packets():
    """dpss + hostdp-dst + ldp-dsr: the per-packet total exceeds dpss alone by the computed
    per-packet costs of the other two, in the substitution relation (the local-DP lane covers a
    changed item, not a packet's presence), each add/remove cost as a group of 2."""
    s = Settings(seed=1, epsilon=0.5, delta=1e-6)
    gs = {n: registry.make(n, s).guarantee() for n in ("dpss", "hostdp-dst", "ldp-dsr")}
    alone, both = Ledger(), Ledger()
    alone.record("dpss", 1, gs["dpss"], 1)
    for n, g in gs.items():
        both.record(n, 1, g, 1)
    solo, total = alone.to_json(), both.to_json()
    # independent arithmetic: add/remove (ε, δ) -> substitution (2ε, (1+e^ε)δ); LDP: R·ε per window
    sub_eps, sub_delta = 2 * 0.5, (1 + math.exp(0.5)) * 1e-6
    assert total["relation"] == "substitute"
    assert total["epsilon"] == pytest.approx(sub_eps + sub_eps + 0.5)
    assert total["delta"] == pytest.approx(2 * sub_delta)
    assert solo["epsilon"] == pytest.approx(0.5) and total["epsilon"] > solo["epsilon"]
    assert any(n.startswith("per packet: dpss") and "ldp-dsr" in n for n in total["notes"])
    units = {g["unit_kind"]: g for g in total["other_units"]}
    assert set(units) == {"host", "report"} and units["report"]["epsilon"] == pytest.approx(0.0005)


def test_seeded_noise_is_typed_not_read_from_words():
    g = registry.make("dpss", Settings(seed=1)).guarantee()
    assert g.seeded and not g.private
    words = Guarantee(g.model, g.cost, noise="seeded: NOT private (a label only)")
    assert words.private  # the label decides nothing
