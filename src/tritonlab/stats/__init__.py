"""Statistics over measured cells: summaries over repeats, robust paired intervals, verdicts,
the noise floor and workload comparability."""
