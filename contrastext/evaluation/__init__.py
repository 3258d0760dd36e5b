"""Evaluation: STS, classification probes and metrics, geometry, gradient diagnostics, plots."""
