"""Clusters built on clouds: providers and the infrastructure controller."""
