"""What the API refuses on create and update, beyond the shape the models give.

The models say what a body looks like; these rules say whether it makes sense:
a kubeconfig that resolves, a manifest Kubernetes would take, labels and names
Kubernetes allows, roles that grant something. They run on API input only
(create, update, dry runs, ``shoal check``), never when stored objects are
read back, so objects stored before a rule existed still load, list and delete.
Each finding names the field with a path such as
``spec.kubeconfig.contexts[0].context.user``. Importing this package alone
loads no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.model.validation.findings import Finding

if TYPE_CHECKING:
    from shoal.model.base import Kind

__all__ = ["Finding", "check", "check_templates"]


def check(obj: Kind) -> list[Finding]:
    """Every finding on ``obj`` (errors and warnings); see ``kinds.check``."""
    from shoal.model.validation.kinds import check as check_kind

    return check_kind(obj)


async def check_templates(obj: Kind) -> list[Finding]:
    """The findings of the templates ``obj`` carries (TOSCA), parsed in a confined worker."""
    from shoal.model.validation.kinds import check_templates as check_kind_templates

    return await check_kind_templates(obj)
