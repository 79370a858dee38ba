"""The monitor's lab: the product-path audit, the replay, soak and cluster benchmarks and the utility
sweep commands. The product never imports it; the CLI loads it for ``dptop audit``, ``bench`` and ``sweep-*``."""
