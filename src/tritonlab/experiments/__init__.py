"""Experiments: plans (a baseline and single-variable changes), the runner, the result store."""
