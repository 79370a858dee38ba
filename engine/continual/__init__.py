"""Continual observation (paper 001): the Gaussian binary mechanism, LazySketch and PunctualSketch
frequency oracles, and LazyHH heavy hitters up to a public horizon."""
