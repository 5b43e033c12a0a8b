"""The ``sim`` provider: clusters made, grown and deleted in ``shoal sim`` (its admin API).

The infrastructure id is the simulated cluster's name, which is the key the
controller gives: creating it twice is refused by the simulator, so a create
is never doubled. The template's compute node templates give the node count
and each node's cpu and memory (``shoal.model.tosca_nodes.node_shape``; all nodes of
a simulated cluster share one size: the first template's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from shoal.infrastructure.providers import (
    InfrastructureNotFound,
    InfrastructureState,
    ProviderError,
    answer,
)
from shoal.model.base import Metadata, ReasonCode
from shoal.model.constraints import MetricRef
from shoal.model.infrastructure import (
    CloudSpec,
    GlobalCloud,
    GlobalInfrastructureProvider,
    InfrastructureProviderRef,
    InfrastructureProviderSpec,
    OpenstackAuth,
    OpenstackSpec,
    PasswordAuth,
    PasswordProject,
    PasswordUser,
    SimProviderSpec,
)
from shoal.model.tosca_nodes import NodeGroup, node_shape

LOCATIONS = ("DE", "FR")


def sample_objects(
    sim_url: str, metrics: Mapping[str, str] | None = None, token: str | None = None
) -> tuple[GlobalInfrastructureProvider, list[GlobalCloud]]:
    """The ``sim`` provider on ``sim_url`` and two clouds it builds clusters on, cloud-de and
    cloud-fr (labelled ``location``), each with the metric ``metrics`` names for its location;
    ``token``: the simulator's admin token.

    The demo (``shoal up``), the tests and ``bench/clouds.py`` make the same ones. The clouds
    are OpenStack clouds in Krake's terms; the sim provider does not use their Keystone login.
    """
    provider = GlobalInfrastructureProvider(
        metadata=Metadata(name="sim"),
        spec=InfrastructureProviderSpec(type="sim", sim=SimProviderSpec(url=sim_url, token=token)),
    )
    login = OpenstackAuth(password=PasswordAuth(
        user=PasswordUser(username="demo", password="unused-by-sim"),
        project=PasswordProject(name="demo"),
    ))  # fmt: skip
    clouds = []
    for location in LOCATIONS:
        metric = (metrics or {}).get(location)
        clouds.append(GlobalCloud(
            metadata=Metadata(name=f"cloud-{location.lower()}", labels={"location": location}),
            spec=CloudSpec(openstack=OpenstackSpec(
                url=sim_url, auth=login,
                metrics=[] if metric is None else [MetricRef(name=metric, weight=1.0)],
                infrastructure_provider=InfrastructureProviderRef(name="sim"),
            )),
        ))  # fmt: skip
    return provider, clouds


class SimProvider:
    def __init__(self, provider: Any, cloud: Any, session: aiohttp.ClientSession) -> None:
        self.name = provider.metadata.name
        self.url = provider.spec.sim.url.rstrip("/") + "/admin/clusters"
        self.session = session
        token = provider.spec.sim.token
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def _call(
        self, method: str, path: str, code: ReasonCode, body: Any = None
    ) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": self.headers}
        if body is not None:
            kwargs["data"] = orjson.dumps(body)
        status, text = await answer(
            self.session, method, self.url + path, f"sim provider {self.name}", code, **kwargs
        )
        try:
            return status, orjson.loads(text) if text else None
        except orjson.JSONDecodeError:
            return status, text

    @staticmethod
    def _shape(template: dict[str, Any]) -> tuple[int, NodeGroup]:
        try:
            groups = node_shape(template)
        except ValueError as error:
            raise ProviderError(str(error), ReasonCode.INVALID_TOSCA_MANIFEST) from error
        if not groups:
            raise ProviderError(
                "the sim provider needs at least one compute node template (tosca.nodes.Compute)",
                ReasonCode.INVALID_TOSCA_MANIFEST,
            )
        return sum(group.count for group in groups), groups[0]

    async def find(self, key: str) -> str | None:
        status, _ = await self._call("GET", f"/{key}", ReasonCode.RETRIEVE_FAILED)
        if status == 404:
            return None
        _expect(status, 200, "read", key, ReasonCode.RETRIEVE_FAILED)
        return key

    async def create(self, key: str, template: dict[str, Any]) -> str:
        nodes, size = self._shape(template)
        body = {"name": key, "nodes": nodes, "cpu": size.cpu, "memory": size.memory}
        status, _ = await self._call("POST", "", ReasonCode.CREATE_FAILED, body)
        if status == 409:  # made by an earlier attempt: the same key is the same cluster
            return key
        _expect(status, 201, "create", key, ReasonCode.CREATE_FAILED)
        return key

    async def state(self, infrastructure_id: str) -> InfrastructureState:
        status, _ = await self._call("GET", f"/{infrastructure_id}", ReasonCode.RETRIEVE_FAILED)
        if status == 404:
            raise InfrastructureNotFound(infrastructure_id)
        _expect(status, 200, "read", infrastructure_id, ReasonCode.RETRIEVE_FAILED)
        return InfrastructureState.CONFIGURED  # the simulator makes a cluster at once

    async def kubeconfig(self, infrastructure_id: str) -> dict[str, Any]:
        path = f"/{infrastructure_id}/kubeconfig"
        status, body = await self._call("GET", path, ReasonCode.RETRIEVE_FAILED)
        if status == 404:
            raise InfrastructureNotFound(infrastructure_id)
        _expect(status, 200, "read the kubeconfig of", infrastructure_id,
                ReasonCode.RETRIEVE_FAILED)  # fmt: skip
        return dict(body)

    async def reconcile(self, infrastructure_id: str, template: dict[str, Any]) -> None:
        nodes, _ = self._shape(template)
        path = f"/{infrastructure_id}"
        status, _ = await self._call("PATCH", path, ReasonCode.RECONCILE_FAILED, {"nodes": nodes})
        if status == 404:
            raise InfrastructureNotFound(infrastructure_id)
        _expect(status, 200, "resize", infrastructure_id, ReasonCode.RECONCILE_FAILED)

    async def reconfigure(self, infrastructure_id: str) -> None:
        return None  # a simulated cluster is never half-configured

    async def delete(self, infrastructure_id: str) -> None:
        status, _ = await self._call("DELETE", f"/{infrastructure_id}", ReasonCode.DELETE_FAILED)
        if status != 404:
            _expect(status, 200, "delete", infrastructure_id, ReasonCode.DELETE_FAILED)


def _expect(status: int, wanted: int, what: str, name: str, code: ReasonCode) -> None:
    if status != wanted:
        refused = ReasonCode.INVALID_TOSCA_MANIFEST if status == 422 else code
        raise ProviderError(f"the simulator could not {what} cluster {name}: HTTP {status}",
                            refused)  # fmt: skip
