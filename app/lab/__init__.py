"""The monitor's lab: the ``bench`` and ``audit`` commands, the product-path audit and the product
conformance matrix, the replay, soak, live and cluster benchmarks and the utility sweep commands.
The product never imports it; the CLI loads it for ``dptop audit``, ``bench``, ``cluster-bench`` and
``sweep-*``."""
