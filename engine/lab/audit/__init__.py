"""Empirical privacy audit: neighbouring streams, events chosen on one half of the runs and tested
on the other with exact Clopper-Pearson bounds, plus white-box checks of the proofs' premises."""
