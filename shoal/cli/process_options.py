"""The options of the commands that start Shoal's processes (``shoal api``, ``shoal up``,
``shoal scheduler`` and each controller), written once."""

from __future__ import annotations

from typing import Annotated

import typer

ApiOption = Annotated[
    str | None, typer.Option("--api", help="URL of the Shoal API (default: $SHOAL_API)")
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="sqlite:///path/shoal.db or etcd://host:port[,host:port...] "
        "(default: $SHOAL_STORE, else 'store:' in the config file, else a SQLite file)",
    ),
]
LeaderElect = Annotated[
    bool,
    typer.Option(
        "--leader-elect/--no-leader-elect",
        help="Act only while holding the lease, so that several replicas run safely",
    ),
]
LeaseDuration = Annotated[
    float,
    typer.Option("--lease-duration", min=0.5, help="Seconds a standby waits before taking over"),
]
Identity = Annotated[
    str | None, typer.Option("--identity", help="Name in the lease (default: hostname-pid)")
]
MetricsPort = Annotated[
    int,
    typer.Option("--metrics-port", min=0, help="Serve this process's /metrics on this port"),
]
LogLevel = Annotated[str, typer.Option("--log-level")]
