"""A Role without rules is accepted, as Krake accepts it, and grants nothing."""

from __future__ import annotations

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ApiError, ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.model.kubernetes import Application
from shoal.testing import shipped
from shoal.testing.wait import wait_for


async def test_a_role_without_rules_is_accepted_and_grants_nothing(
    api: ApiServer, client: ShoalClient
) -> None:
    role = await client.create(Role(metadata=Metadata(name="nothing"), rules=[]))
    assert role.rules == []
    reader = RoleRule(api="kubernetes", resources=["applications"], namespaces=["default"],
                      verbs=["list"])  # fmt: skip
    await client.create(Role(metadata=Metadata(name="reader"), rules=[reader]))
    user = shipped.TENANTS[0]
    await client.create(RoleBinding(
        metadata=Metadata(name="alice"), users=[user], roles=["nothing", "reader"]
    ))  # fmt: skip
    async with shipped.client(api.url, user) as alice:

        async def bound() -> bool:
            try:
                await alice.list(Application, "default")
            except ApiError as error:
                assert error.status == 403
                return False
            return True

        await wait_for(bound, message="alice's binding applied")  # the other role grants
        with pytest.raises(ApiError) as refused:
            await alice.list(Application, "system:admin")
        assert refused.value.status == 403
        with pytest.raises(ApiError) as refused:
            await alice.list(Role)
        assert refused.value.status == 403
