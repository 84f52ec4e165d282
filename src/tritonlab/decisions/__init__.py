"""Decisions from the statistics and explanations: adaptive repeats, tune's search and race,
recommendations, the frontier, capacity and the CI gate."""
