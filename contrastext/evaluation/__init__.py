"""Evaluation: STS, classification probes and metrics, geometry, gradient diagnostics, paired statistics over
seeds, plots."""
