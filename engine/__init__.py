"""dptop's engine: numba kernels and thin classes for private and non-private heavy hitters,
the runner that feeds them in parallel, and the privacy accounting. Never imports Qt."""
