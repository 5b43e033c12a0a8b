"""The two registered sim clusters of tests/kube (de, fr), for the observer's tests."""

from tests.kube.conftest import clusters, kube

__all__ = ["clusters", "kube"]
