"""The CLI fixtures, for ``shoal get events``."""

from tests.cli.conftest import isolated_config, shoal

__all__ = ["isolated_config", "shoal"]
