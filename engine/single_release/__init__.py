"""Single release per public epoch (papers 000 and 002): DP SpaceSaving, DP Misra-Gries and
error-envelope heavy hitters over DP CountMin / CountSketch, each with its privacy map beside it."""
