"""Local-DP mode (docs/local-dp.md, paper 003): agents randomize, an untrusted collector finds
the heavy hitters with HeavyGuardian.

Frequency oracles with exact integer samplers on OS entropy (``grr``, ``olh_hr``, ``entropy``),
HeavyGuardian with exact ED (``heavyguardian``), the schemes as agent and collector halves that
exchange only (version, tag, symbol) (``protocol``, ``dsr``, ``bdr``), their in-process wiring and
the agent's sampler (``pipeline``), the public domains (``domain``), the prefix search
(``prefix``), the accounting and guarantee (``accounting``), the registered algorithms (their
base ``scheme``, ``domain_schemes``, ``prefix_scheme``), exact transition matrices for the privacy
tests (``transitions``) and metrics (``metrics``); the ε sweep is the lab's
(``dptop.engine.lab.local_dp_sweep``).
"""
