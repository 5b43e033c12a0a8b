"""Shoal: multi-cluster application scheduler and orchestrator."""
