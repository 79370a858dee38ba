"""Non-private baselines shown next to the private panels: exact counts, SpaceSaving,
Misra-Gries, CountMin with a top-k heap and exact counts over the last w packets."""
