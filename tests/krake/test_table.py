"""The committed Krake table (``shoal.model.krake_table``) is what Krake's own classes give."""

from __future__ import annotations

import subprocess

from tests.krake.conftest import HERE, ROOT


def test_krake_table_is_what_krakes_classes_say(krake_python: str) -> None:
    generated = subprocess.run(
        [krake_python, "-W", "ignore", "krake_fields.py", "--python"],
        cwd=HERE,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert generated == (ROOT / "shoal" / "model" / "krake_table.py").read_text()
