"""Krake's own observer schema rules on given inputs; run by Krake's Python 3.8.

    python observer_probe.py CASES_JSON

Takes ``{"defaults": [object, ...], "validations": [{"id", "schema", "manifest"}]}``
and prints one JSON line per input: ``{"default": schema}`` (Krake's default schema
of the object), ``{"id", "refused": null | message}`` (Krake's validation).
This file must stay valid Python 3.8: it runs in Krake's virtualenv.
"""

import json
import sys

from krake.controller.kubernetes.hooks import generate_default_observer_schema_dict
from krake.data.kubernetes import ObserverSchemaError, _validate_observer_schema


def main():
    cases = json.loads(sys.argv[1])
    for obj in cases["defaults"]:
        print(json.dumps({"default": generate_default_observer_schema_dict(obj, True)}))
    for case in cases["validations"]:
        try:
            _validate_observer_schema(case["schema"], case["manifest"])
        except (ObserverSchemaError, AssertionError, IndexError, TypeError, KeyError) as error:
            refused = f"{type(error).__name__}: {error}"
        else:
            refused = None
        print(json.dumps({"id": case["id"], "refused": refused}))


if __name__ == "__main__":
    main()
