"""The capture lab: the parser benchmark and the paced and TX-ring senders that offer packets to a live
capture in tests and benchmarks. The product never imports it."""
