"""How a client proves who it is: a bearer token and/or a client certificate, and the CA to trust.

From the environment (``SHOAL_TOKEN``, ``SHOAL_CA``, ``SHOAL_CERT``,
``SHOAL_KEY``), else from a configuration mapping with the same keys in lower
case (the CLI's config file, a component's configuration file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

FIELDS = ("token", "ca", "cert", "key")


@dataclass(frozen=True)
class Credentials:
    token: str | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    @classmethod
    def resolve(cls, config: Mapping[str, Any] | None = None) -> Credentials:
        config = config or {}
        values = {}
        for name in FIELDS:
            value = os.environ.get(f"SHOAL_{name.upper()}") or config.get(name)
            values[name] = str(value) if value else None
        return cls(**values)

    def ssl_context(self) -> ssl.SSLContext | None:
        """None: the system's CAs and no client certificate."""
        if self.ca is None and self.cert is None:
            return None
        import ssl  # only here: ``shoal get`` over plain HTTP starts without it

        context = ssl.create_default_context(cafile=self.ca)
        if self.cert is not None:
            context.load_cert_chain(self.cert, self.key)
        return context
