"""How the bundled demo capture is built (provenance in ../SOURCES.md); not part of the product."""
