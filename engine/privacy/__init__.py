"""Privacy primitives that do not belong to one mechanism: exact discrete samplers on the OS
CSPRNG, the seeded bulk Gaussian generator, and composition (sequential, group privacy, zCDP)."""
