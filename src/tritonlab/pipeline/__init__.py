"""Orchestration: the ways to run a plan (project, sweep, tune) over the shared cell runner.

The CLI only calls these and prints; the runner (``experiments/runner.py``) measures cells
without knowing which of them drives it.
"""
