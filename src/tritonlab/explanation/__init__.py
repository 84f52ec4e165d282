"""Explanations: the named rules, the fitted serving cost model and its fit checks, the
operators' roofline, a pipeline's steps."""
