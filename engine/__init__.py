"""dptop.engine: the private and non-private heavy-hitter algorithms (numba kernels under thin
classes), grouped by model, with the runner, privacy primitives, audit and benchmarks apart.
Never imports the app, Qt or the capture layer (checked by import-linter in ``make test``)."""
