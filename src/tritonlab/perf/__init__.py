"""perf_analyzer: locate it, build its command, run it, and parse what it measured."""
