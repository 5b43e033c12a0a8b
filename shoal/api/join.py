"""Pull clusters join the hub: join tokens, the exchange, renewals, and the CA to pin.

``POST /kubernetes/namespaces/{ns}/jointokens`` makes a bootstrap token (the right:
``create`` on ``kubernetes/jointokens`` in that namespace). ``POST /kubernetes/join``
takes the token, a name and labels, registers the Cluster in the token's namespace
with ``spec.mode: pull`` and no kubeconfig, and answers with a credential of that
cluster's own identity (``shoal.api.auth.clusters``); the guard lets this one route
through without a login, the token is its credential. ``POST .../clusters/{name}/
credential`` gives a cluster's agent a fresh credential for its valid one.
``GET /cluster-info`` tells a joining agent the CA it must find pinned by its hash.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path as FilePath
from typing import Any

import orjson
from fastapi import APIRouter, Body, Path, Request
from pydantic import Field
from starlette.responses import Response

from shoal.api.auth import Protection, clusters, jointokens
from shoal.api.auth.authn import User
from shoal.api.auth.clusters import ClusterCredentials, Credential, identity
from shoal.api.codec import rfc3339
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.machinery.names import MAX_OBJECT_NAME, OBJECT_NAME
from shoal.machinery.problems import ProblemError
from shoal.model.base import LabelKey, LabelValue, Metadata, Model
from shoal.model.kubernetes import Cluster, ClusterSpec
from shoal.store.base import AlreadyExists

_NAME = OBJECT_NAME.pattern
CLUSTER_INFO = "/cluster-info"


class TokenRequest(Model):
    ttl: float = Field(
        default=jointokens.DEFAULT_TTL,
        ge=60,
        le=jointokens.MAX_TTL,
        description="Seconds the token may be used (it registers one cluster, once).",
    )
    cluster: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_OBJECT_NAME,
        pattern=_NAME,
        description="The one cluster name it joins: a pull cluster that exists is joined "
        "again by a new agent (its credentials issued before are revoked).",
    )


class JoinRequest(Model):
    token: str = Field(min_length=1, max_length=64, description="<id>.<secret>")
    name: str = Field(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    agent_version: str = Field(default="", max_length=64)


def _moment(seconds: float) -> str:
    return rfc3339(datetime.fromtimestamp(seconds, UTC))


def _answer(credential: Credential, namespace: str, name: str) -> Response:
    body = {
        "credential": credential.token,
        "expires": _moment(credential.expires),
        "user": credential.user,
        "namespace": namespace,
        "name": name,
    }
    return Response(orjson.dumps(body), media_type="application/json")


def build_router(resources: Resources, security: Protection | None) -> APIRouter:
    """The routes; joins only where the API can sign credentials (security with a secrets
    key: ``secrets.key_file``), elsewhere no such route."""
    router = APIRouter(route_class=StrictJsonRoute)
    _cluster_info(router, security)
    credentials = security.clusters if security else None
    if credentials is not None:
        _joins(router, resources, credentials)
    return router


def _joins(router: APIRouter, resources: Resources, credentials: ClusterCredentials) -> None:
    store = resources.store

    async def create_token(
        request: Request,
        namespace: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
        body: TokenRequest = Body(default_factory=TokenRequest),
    ) -> Response:
        user = request.scope.get("shoal.user")
        by = user.name if isinstance(user, User) else ""
        made = await jointokens.create(store, namespace, body.ttl, by, cluster=body.cluster)
        answer = {
            "token": made.token,
            "id": made.id,
            "namespace": made.namespace,
            "expires": _moment(made.expires),
            "cluster": made.cluster,
        }
        return Response(orjson.dumps(answer), media_type="application/json")

    router.add_api_route(
        "/kubernetes/namespaces/{namespace}/jointokens",
        create_token,
        methods=["POST"],
        name="create_jointokens",
        summary="A bootstrap token that joins one pull cluster to this namespace, once",
        tags=["kubernetes"],
    )

    async def join(body: JoinRequest) -> Response:
        claim = await jointokens.consume(store, body.token, body.name)
        if claim.cluster is not None:
            try:
                return await rejoin(claim, body)
            except ProblemError as error:
                if error.status != 404:  # 404: no such cluster (now), the token registers it
                    await jointokens.release(store, claim)
                    raise
            except BaseException:
                await jointokens.release(store, claim)
                raise
        cluster = Cluster(
            metadata=Metadata(name=body.name, namespace=claim.namespace, labels=body.labels),
            spec=ClusterSpec(mode="pull"),
        )
        try:
            await resources.create(Cluster, cluster, claim.namespace)
        except AlreadyExists:
            await jointokens.release(store, claim)
            raise ProblemError(
                409,
                f"name: cluster {claim.namespace}/{body.name} exists; the token is not used "
                "(a token made for that cluster, join-token create --cluster NAME, joins it "
                "again)",
                errors=[{"field": "name", "reason": "a cluster of that name exists"}],
            ) from None
        except BaseException:
            await jointokens.release(store, claim)
            raise
        stored = await resources.get(Cluster, body.name, claim.namespace)
        uid = stored.metadata.uid or ""
        return _answer(credentials.issue(claim.namespace, body.name, uid), claim.namespace,
                       body.name)  # fmt: skip

    async def rejoin(claim: jointokens.Claim, body: JoinRequest) -> Response:
        """A new agent for pull cluster ``body.name`` (its state lost): the Cluster and what
        runs there are kept; every credential issued for it before is revoked."""
        stored = await resources.get(Cluster, body.name, claim.namespace)
        where = f"cluster {claim.namespace}/{body.name}"
        if stored.spec.mode != "pull":
            raise ProblemError(409, f"name: {where} is a push cluster; the token is not used",
                               errors=[{"field": "name", "reason": "not a pull cluster"}])
        if stored.metadata.deleted is not None:
            raise ProblemError(409, f"name: {where} is being deleted; the token is not used",
                               errors=[{"field": "name", "reason": "being deleted"}])
        uid = stored.metadata.uid or ""
        generation = await clusters.next_generation(store, uid, f"join token {claim.key}")
        return _answer(credentials.issue(claim.namespace, body.name, uid, generation),
                       claim.namespace, body.name)  # fmt: skip

    router.add_api_route(
        "/kubernetes/join",
        join,
        methods=["POST"],
        name="join_cluster",
        summary="Register a pull cluster with a join token; answers its own credential",
        tags=["kubernetes"],
    )

    async def renew(
        request: Request,
        namespace: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
        name: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
    ) -> Response:
        user = request.scope.get("shoal.user")
        own = identity(user if isinstance(user, User) else None)
        if own is None or (own.namespace, own.name) != (namespace, name):
            raise ProblemError(403, "only the cluster's own credential renews it")
        token = (request.headers.get("authorization") or "").partition(" ")[2].strip()
        claims = credentials.claims(token)
        stored = await resources.get(Cluster, name, namespace)
        if claims is None or claims.get("uid") != stored.metadata.uid:
            raise ProblemError(403, "the credential is of a cluster of that name now gone")
        if stored.spec.mode != "pull" or stored.metadata.deleted is not None:
            raise ProblemError(403, f"cluster {namespace}/{name} is no pull cluster now")
        uid = stored.metadata.uid or ""
        # the generation of the credential presented, never the newest: a renewal racing a
        # revoke gives a credential the revoke refuses as well
        held = int(claims.get("gen") or 0)
        if held < await clusters.generation(store, uid):
            raise ProblemError(401, "credential revoked: a revoke came after it was issued")
        return _answer(credentials.issue(namespace, name, uid, held), namespace, name)

    router.add_api_route(
        "/kubernetes/namespaces/{namespace}/clusters/{name}/credential",
        renew,
        methods=["POST"],
        name="renew_cluster_credential",
        summary="A fresh credential for a pull cluster's agent, in exchange for its valid one",
        tags=["kubernetes"],
    )

    async def revoke(
        request: Request,
        namespace: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
        name: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
    ) -> Response:
        stored = await resources.get(Cluster, name, namespace)
        if stored.spec.mode != "pull":
            raise ProblemError(409, f"cluster {namespace}/{name} is a push cluster: it holds "
                               "no credential of its own")  # fmt: skip
        user = request.scope.get("shoal.user")
        by = user.name if isinstance(user, User) else ""
        generation = await clusters.next_generation(store, stored.metadata.uid or "", by)
        body = {"namespace": namespace, "name": name, "generation": generation}
        return Response(orjson.dumps(body), media_type="application/json")

    router.add_api_route(
        "/kubernetes/namespaces/{namespace}/clusters/{name}/credential",
        revoke,
        methods=["DELETE"],
        name="revoke_cluster_credential",
        summary="Revoke every credential issued so far for a pull cluster (its agent needs "
        "a new join token)",
        tags=["kubernetes"],
    )



def _cluster_info(router: APIRouter, security: Protection | None) -> None:
    tls = security.security.tls if security is not None else None
    ca = FilePath(tls.client_ca).read_text() if tls is not None and tls.client_ca else None

    async def cluster_info() -> dict[str, Any]:
        return {"ca": ca}

    router.add_api_route(
        CLUSTER_INFO,
        cluster_info,
        methods=["GET"],
        name="cluster_info",
        summary="The CA of this API, for a joining agent to check against its pinned hash",
        tags=["kubernetes"],
    )
