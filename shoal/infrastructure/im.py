"""The ``im`` provider: the Infrastructure Manager's REST API, as Krake speaks it.

- ``POST /infrastructures?async=true`` (the TOSCA template as ``text/yaml``) answers
  the new infrastructure's URI;
- ``GET /infrastructures/{id}/state``, ``/outputs`` (the ``kubeconfig`` output),
  ``/tosca``; ``POST /infrastructures/{id}?async=true`` changes it to a new
  template; ``PUT /infrastructures/{id}/reconfigure``; ``DELETE /infrastructures/{id}``.

Every request carries IM's ``Authorization`` header: the IM login (token, or
user and password), then the cloud's (its OpenStack password login). Shoal
marks each template with ``metadata.shoal_infrastructure: <key>``, which IM keeps,
so ``find`` can tell which of the user's infrastructures was made for a cluster.
"""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import orjson
import yaml

from shoal.infrastructure.providers import (
    InfrastructureNotFound,
    InfrastructureState,
    ProviderError,
    answer,
)
from shoal.model.base import ReasonCode

MARK = "shoal_infrastructure"
# IM's states, as Krake maps them (https://imdocs.readthedocs.io, "valid states")
_STATES = {
    "pending": InfrastructureState.PENDING,
    "running": InfrastructureState.CREATING,  # machines up, not configured yet
    "configured": InfrastructureState.CONFIGURED,
    "unconfigured": InfrastructureState.UNCONFIGURED,
    "deleting": InfrastructureState.DELETING,
    "unknown": InfrastructureState.FAILED,
    "stopped": InfrastructureState.FAILED,
    "off": InfrastructureState.FAILED,
    "failed": InfrastructureState.FAILED,
}


def _line(**fields: str) -> str:
    """One line of IM's auth data: ``key = value`` pairs separated by ``;``."""
    return ";".join(f"{key} = {value}" for key, value in fields.items())


def auth_header(provider: Any, cloud: Any) -> str:
    """IM's ``Authorization`` value: the IM login, then the cloud's (Krake's format)."""
    im = provider.spec.im
    name = provider.metadata.name
    if im.token:
        lines = [_line(id=name, type="InfrastructureManager", token=im.token)]
    else:
        lines = [_line(id=name, type="InfrastructureManager", username=im.username,
                       password=im.password)]  # fmt: skip
    openstack = cloud.spec.openstack
    password = openstack.auth.password
    lines.append(_line(
        id=cloud.metadata.name, type="OpenStack", host=openstack.url,
        auth_version=f"{password.version}.x_password", username=password.user.username,
        password=password.user.password, tenant=password.project.name,
    ))  # fmt: skip
    for extra in im.clouds:
        fields = extra.model_dump(exclude_none=True, exclude={"comment"})
        lines.append(_line(**{key: str(value) for key, value in fields.items()}))
    # IM reads the two characters backslash and n between lines, as Krake sends them
    return "\\n".join(lines)


class InfrastructureManager:
    def __init__(self, provider: Any, cloud: Any, session: aiohttp.ClientSession) -> None:
        self.name = provider.metadata.name
        self.url = provider.spec.im.url.rstrip("/") + "/infrastructures"
        self.session = session
        self.headers = {"Authorization": auth_header(provider, cloud),
                        "Accept": "application/json"}  # fmt: skip

    async def _call(
        self, method: str, path: str, code: ReasonCode, **kwargs: Any
    ) -> tuple[int, str]:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return await answer(self.session, method, self.url + path, f"IM {self.name}", code,
                            headers=headers, **kwargs)  # fmt: skip

    def _failed(self, what: str, status: int, text: str, code: ReasonCode) -> ProviderError:
        return ProviderError(f"IM {self.name} could not {what}: HTTP {status}: {text[:300]}", code)

    async def find(self, key: str) -> str | None:
        status, text = await self._call("GET", "", ReasonCode.RETRIEVE_FAILED)
        if status != 200:
            raise self._failed("list infrastructures", status, text, ReasonCode.RETRIEVE_FAILED)
        for entry in orjson.loads(text).get("uri-list", []):
            infrastructure_id = entry["uri"].rstrip("/").rsplit("/", 1)[-1]
            status, text = await self._call("GET", f"/{infrastructure_id}/tosca",
                                            ReasonCode.RETRIEVE_FAILED)  # fmt: skip
            if status != 200:
                continue  # deleted meanwhile, or not a TOSCA infrastructure
            template = yaml.safe_load(orjson.loads(text).get("tosca") or "") or {}
            if (template.get("metadata") or {}).get(MARK) == key:
                return str(infrastructure_id)
        return None

    async def create(self, key: str, template: dict[str, Any]) -> str:
        marked = copy.deepcopy(template)
        marked.setdefault("metadata", {})[MARK] = key
        status, text = await self._call(
            "POST", "?async=true", ReasonCode.CREATE_FAILED,
            data=yaml.safe_dump(marked), headers={"Content-Type": "text/yaml"},
        )  # fmt: skip
        if status == 400:
            raise self._failed("create", status, text, ReasonCode.INVALID_TOSCA_MANIFEST)
        if status != 200:
            raise self._failed("create", status, text, ReasonCode.CREATE_FAILED)
        uri = orjson.loads(text)["uri"] if text.startswith("{") else text.strip()
        return str(uri.rstrip("/").rsplit("/", 1)[-1])

    async def state(self, infrastructure_id: str) -> InfrastructureState:
        status, text = await self._call("GET", f"/{infrastructure_id}/state",
                                        ReasonCode.RETRIEVE_FAILED)  # fmt: skip
        if status == 404:
            raise InfrastructureNotFound(infrastructure_id)
        if status != 200:
            raise self._failed("read the state", status, text, ReasonCode.RETRIEVE_FAILED)
        state = orjson.loads(text).get("state") or {}
        overall = str(state.get("state") or "")
        if "unconfigured" in (state.get("vm_states") or {}).values():
            overall = "unconfigured"  # one machine that failed to configure counts (Krake)
        if overall not in _STATES:
            raise ProviderError(f"IM {self.name}: unknown state {overall!r}",
                                ReasonCode.RETRIEVE_FAILED)  # fmt: skip
        return _STATES[overall]

    async def kubeconfig(self, infrastructure_id: str) -> dict[str, Any]:
        status, text = await self._call("GET", f"/{infrastructure_id}/outputs",
                                        ReasonCode.RETRIEVE_FAILED)  # fmt: skip
        if status == 404:
            raise InfrastructureNotFound(infrastructure_id)
        if status != 200:
            raise self._failed("read the outputs", status, text, ReasonCode.RETRIEVE_FAILED)
        found = (orjson.loads(text).get("outputs") or {}).get("kubeconfig")
        if not found:
            raise ProviderError(
                f"IM {self.name}: infrastructure {infrastructure_id} has no kubeconfig output",
                ReasonCode.RETRIEVE_FAILED,
            )
        try:
            config = found if isinstance(found, dict) else yaml.safe_load(found)
        except yaml.YAMLError as error:
            raise ProviderError(f"IM {self.name}: the kubeconfig output is not YAML: {error}",
                                ReasonCode.RETRIEVE_FAILED) from error  # fmt: skip
        if not isinstance(config, dict):
            raise ProviderError(f"IM {self.name}: the kubeconfig output is not a mapping",
                                ReasonCode.RETRIEVE_FAILED)  # fmt: skip
        return config

    async def reconcile(self, infrastructure_id: str, template: dict[str, Any]) -> None:
        status, text = await self._call(
            "POST", f"/{infrastructure_id}?async=true", ReasonCode.RECONCILE_FAILED,
            data=yaml.safe_dump(template), headers={"Content-Type": "text/yaml"},
        )  # fmt: skip
        if status == 404:
            raise InfrastructureNotFound(infrastructure_id)
        if status != 200:
            raise self._failed("change", status, text, ReasonCode.RECONCILE_FAILED)

    async def reconfigure(self, infrastructure_id: str) -> None:
        status, text = await self._call("PUT", f"/{infrastructure_id}/reconfigure",
                                        ReasonCode.RECONFIGURE_FAILED)  # fmt: skip
        if status != 200:
            raise self._failed("reconfigure", status, text, ReasonCode.RECONFIGURE_FAILED)

    async def delete(self, infrastructure_id: str) -> None:
        status, text = await self._call("DELETE", f"/{infrastructure_id}?async=true",
                                        ReasonCode.DELETE_FAILED)  # fmt: skip
        if status not in (200, 404):
            raise self._failed("delete", status, text, ReasonCode.DELETE_FAILED)
