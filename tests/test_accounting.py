"""Privacy maps: exact values from the specs' worked tables (docs/dpss-eehh.md §4.4–§4.8, §6.3;
docs/dp-misra-gries.md §5.5), composition, conversions, budget refusal and parameter errors."""
import math

import pytest

from dptop.engine.single_release import dpmg, dpss, eehh, length
from dptop.engine.privacy import measures
from dptop.engine.privacy.budget import Budget
from dptop.engine.privacy.measures import ApproxDP, PureDP, ZCDP


@pytest.mark.parametrize("eps,gamma", [(0.01, 761.09), (0.1, 77.01), (0.5, 16.20), (1, 8.60), (10, 1.76)])
def test_dpss_gamma_strict_discrete_table(eps, gamma):
    # docs/dpss-eehh.md §4.4, δ_A = 0.001, "strict discrete" column.
    assert round(dpss.dpss_gamma(eps, 1e-3), 2) == gamma


def test_length_slack_example():
    # §4.5: ε_n = 0.01, δ_n = 1e-4 gives s_n = 853.
    assert length.length_slack(0.01, 1e-4) == 853


def test_split_and_length_composition_give_back_the_budget():
    for eps, delta in ((1.0, 1e-6), (0.1, 1e-3), (3.0, 0.05)):
        ea, da, en, dn = length.split_length_budget(eps, delta)
        assert (en, dn) == (0.1 * eps, 0.1 * delta)
        assert ea == pytest.approx(0.9 * eps, rel=1e-15)
        assert da == pytest.approx(0.9 * delta / math.exp(en), rel=1e-15)
        cost = length.length_composed_cost(ea, da, en, dn)
        assert cost.epsilon == pytest.approx(eps, rel=1e-15)
        assert cost.delta == pytest.approx(delta, rel=1e-12)


def test_dpss_threshold_counterexample_values():
    # §4.5: k~ = 4, k = 2, ε = 1, δ = 1e-3 (paper γ = ln(2/δ)/ε = 7.60): τ(1000) = 492.40, τ(999) = 491.90.
    g = math.log(2 / 1e-3)
    assert dpss.dpss_threshold(1000, 1000, 2, 4, g) == pytest.approx(492.40, abs=0.005)
    assert dpss.dpss_threshold(999, 999, 2, 4, g) == pytest.approx(491.90, abs=0.005)


def test_dpss_threshold_uses_noisy_length_only():
    # T7: τ is a function of (ñ, n_hi) and the parameters; the exact n is not an argument.
    assert dpss.dpss_threshold(5000, 5200, 8, 16, 10.0) == max(5000 / 8 - 10, 5200 / 16 + 11)
    assert dpss.dpss_threshold(100, 300, 8, 16, 10.0) == 300 / 16 + 11


@pytest.mark.parametrize("gamma", [math.log(2000) / 0.1, math.log(8000) / 0.1])
def test_k_tilde_sizing_example(gamma):
    # §4.8: n = 2^28, k = 512, ε = 0.1, δ = 1e-3 gives k~ = 513 with both γ values.
    assert dpss.dpss_k_tilde_for(1 << 28, 512, gamma) == 513


def test_k_tilde_sizing_rejects_short_epochs():
    with pytest.raises(ValueError, match=r"n_min \(100\) must exceed"):
        dpss.dpss_k_tilde_for(100, 8, 10.0)


def test_dpss_min_packets_is_the_smallest_passing_length():
    for k, kt, eps, delta in ((8, 16, 1.0, 1e-6), (128, 256, 0.1, 1e-3), (1, 2, 1.0, 0.1)):
        ea, da, en, dn = length.split_length_budget(eps, delta)
        g, s = dpss.dpss_gamma(ea, da), length.length_slack(en, dn)
        m = dpss.dpss_min_packets(k, kt, g, s)
        assert m > dpss.dpss_threshold(m, m + s + 1, k, kt, g)
        assert m - 1 <= dpss.dpss_threshold(m - 1, m + s, k, kt, g)


@pytest.mark.parametrize("eps,delta,tau", [(1.0, 1e-6, 33), (0.5, 1e-6, 63), (1.0, 1e-9, 47), (0.1, 1e-6, 301)])
def test_dpmg_mode_a_geometric_table(eps, delta, tau):
    # docs/dp-misra-gries.md §5.5, "Mode A geometric" column.
    assert dpmg.dpmg_threshold_discrete(eps, delta) == tau


def test_cms_example_at_the_experiment_point():
    # docs/dpss-eehh.md §6.3: T_max = 2^24, k = 128, k~ = 512, ε = 0.1, δ = 1e-3 (no length split):
    # δ_run = 4.75e-4, d = 37, b = 740, ψ ≈ 13,977, τ2 ≈ 140,236 (n_hi ≈ T).
    d_run = eehh.eehh_run_delta(0.1, 1e-3)
    assert d_run == pytest.approx(4.75e-4, rel=2e-3)
    d = eehh.cms_depth(1 << 24, 512, d_run)
    assert d == 37
    assert eehh.sketch_scale(d, 0.1) == pytest.approx(740.0)
    psi = eehh.sketch_psi(eehh.sketch_scale(d, 0.1), d, 1024, d_run)
    assert psi == pytest.approx(13977, abs=1.5)
    tau = eehh.cms_threshold(1 << 24, 1 << 24, 128, 512, 1024, psi)
    assert tau == pytest.approx(98304 + 3 * psi + 1)
    assert tau == pytest.approx(140236, abs=5)


def test_cs_depth_is_odd_and_large_enough():
    from dptop.engine.single_release.eehh_envelope import CS_Q, cs_envelope_depth, cs_psi

    chernoff = 2 * math.sqrt((1 / 16 + CS_Q) * (1 - 1 / 16 - CS_Q))
    for t_max in (1000, 1 << 20, 1 << 26):
        d_run = eehh.eehh_run_delta(1.0, 1e-6)
        d = cs_envelope_depth(t_max, d_run)
        assert d % 2 == 1
        assert 4 * t_max * chernoff ** d <= d_run
        assert 4 * t_max * chernoff ** (d - 2) > d_run
    b = 40.0
    a = math.exp(-1 / b)
    psi = cs_psi(b)
    assert 2 * a ** (math.floor(psi) + 1) / (1 + a) <= CS_Q < 2 * a ** (math.floor(psi) - 1) / (1 + a)


def test_cs_threshold_formula():
    tau = eehh.cs_threshold(10_000, 10_300, 8, 32, 128, 50.0, 128 * 400.0)
    assert tau == pytest.approx(max(10_000 / 8, 10_300 / 32 + 3 * (4 * 20 + 50) + 1))


def test_compose_and_zcdp():
    c = measures.compose([ApproxDP(0.5, 1e-6), PureDP(0.25), ApproxDP(0.25, 2e-6)])
    assert c == ApproxDP(1.0, 3e-6) and c.rho is None
    assert measures.compose([]) == PureDP(0.0)
    assert measures.compose([ZCDP(0.01, 1e-6), ZCDP(0.02, 2e-6)]) == ZCDP(0.03, 3e-6)


def test_group_privacy_two_steps():
    g = measures.group(measures.ApproxDP(1.0, 1e-6), 2)
    assert g.epsilon == 2.0 and g.delta == pytest.approx((1 + math.e) * 1e-6)


def test_budget_refuses_overspending():
    b = Budget(ApproxDP(1.0, 1e-6))
    b.spend(ApproxDP(0.6, 5e-7))
    with pytest.raises(RuntimeError, match="privacy budget exceeded"):
        b.spend(ApproxDP(0.6, 1e-7))
    b.spend(PureDP(0.4))
    with pytest.raises(RuntimeError, match=r"privacy budget exceeded: spending \(ε=0, δ=6e-07\)"):
        b.spend(ApproxDP(0.0, 6e-7))  # δ alone can exceed the total
    b.spend(ApproxDP(0.0, 5e-7))
    assert b.spent_total() == ApproxDP(1.0, 1e-6)
    with pytest.raises(RuntimeError, match="privacy budget exceeded"):
        b.spend(PureDP(1e-9))
    assert len(b.spent) == 3  # a refused spend is not recorded


def test_budget_of_pure_dp_refuses_any_delta():
    b = Budget(PureDP(1.0))
    with pytest.raises(RuntimeError, match="privacy budget exceeded"):
        b.spend(ApproxDP(0.5, 1e-9))
    b.spend(PureDP(1.0))
    assert b.spent_total() == PureDP(1.0)


def test_budget_of_zcdp_composes_rho():
    total = ZCDP(0.02, 2e-6)
    b = Budget(total)
    b.spend(ZCDP(0.01, 1e-6))
    b.spend(ZCDP(0.01, 1e-6))
    assert b.spent_total() == total
    with pytest.raises(RuntimeError, match=r"ρ=0\.021"):
        b.spend(ZCDP(0.001, 0.0))


@pytest.mark.parametrize("call,match", [
    (lambda: PureDP(-1.0), r"epsilon \(-1.0\) must be in \[0, inf\)"),
    (lambda: ApproxDP(math.inf, 0.0), r"epsilon \(inf\) must be in \[0, inf\)"),
    (lambda: ApproxDP(1.0, 1.0), r"delta \(1.0\) must be in \[0, 1\)"),
    (lambda: dpss.dpss_gamma(0.0, 1e-3), r"epsilon \(0\) must be > 0"),
    (lambda: dpss.dpss_gamma(1.0, 1.5), r"delta \(1.5\) must be in \(0, 1\)"),
    (lambda: length.check_k_tilde(8, 8), r"k~ \(8\) must be > k \(8\)"),
    (lambda: length.check_k_tilde(0, 8), r"k \(0\) must be >= 1"),
    (lambda: eehh.cms_depth(0, 8, 1e-6), r"t_max \(0\) must be >= 1"),
    (lambda: measures.ZCDP(-0.1, 1e-6), r"rho \(-0.1\) must be in \[0, inf\)"),
])
def test_invalid_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()
