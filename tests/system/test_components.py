"""The component table and the built-in roles agree: every controller process ``shoal up``
starts has a role and a token of its own (without one, its child is refused for ever)."""

from __future__ import annotations

from shoal.api.auth.roles import COMPONENTS, component_user
from shoal.system.components import CONTROLLERS, NAMES, SCHEDULER


def test_every_controller_process_has_a_role() -> None:
    assert NAMES[0] == SCHEDULER
    assert [c.name for c in CONTROLLERS] == list(NAMES[1:])
    missing = [name for name in NAMES if name not in COMPONENTS]
    assert not missing, f"no built-in role for {missing}"
    assert len({component_user(name) for name in NAMES}) == len(NAMES)
