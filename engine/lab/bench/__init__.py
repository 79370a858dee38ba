"""``dptop bench``: throughput and latency of every algorithm measured side by side in one run."""
