"""The engine's shared core: 128-bit keys and key batches, settings, typed releases and guarantees,
the algorithm interface and registry, the runner (one thread per algorithm), the numba decorators,
and the kernel primitives (hash table, top-k heap, Zipf workloads, utility metrics)."""
