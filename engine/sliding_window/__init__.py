"""Sliding window (paper 004): DPSW-Sketch and its heavy-hitter query over a public prefix
hierarchy or candidate list."""
