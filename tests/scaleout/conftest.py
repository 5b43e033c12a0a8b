"""Scale-out tests: real etcd servers, API and scheduler processes of their own."""

from __future__ import annotations

from tests.fixtures.etcd import etcd_cluster, etcd_server, etcd_url  # noqa: F401  (fixtures)
