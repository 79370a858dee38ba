"""Privacy primitives that do not belong to one mechanism: exact discrete samplers on the OS
CSPRNG, the seeded bulk Gaussian generator, the typed costs (measures: composition, group
privacy, zCDP) and the budget that refuses to overspend."""
