"""Analysis: summaries over repeats, noise-aware verdicts, named explanation rules."""
