"""Negative sources: queues, memory banks, top-K search and cross-process gathering."""
