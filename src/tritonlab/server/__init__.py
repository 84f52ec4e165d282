"""Locating and running tritonserver: prepare, start, wait until ready, stop, logs, statistics."""
