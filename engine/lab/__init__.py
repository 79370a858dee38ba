"""The engine's lab: the empirical privacy audit, the benchmarks and the utility sweeps that measure the
mechanisms. The product never imports it (import-linter, pyproject.toml); ``dptop audit``, ``bench`` and
``sweep-*`` load it."""
