"""Krake's own schemas read Shoal's documents and write them as Krake would; run by Krake's
Python 3.8.

    python shape_probe.py DOCUMENTS.json

``DOCUMENTS.json`` maps a kind to a document read from Shoal's API. One JSON line per
kind: ``{"kind", "krake"}``, the document as Krake's class serialises it after reading
it, or ``{"kind", "error"}`` when Krake's schema refuses it. This file must stay valid
Python 3.8: it runs in Krake's virtualenv.
"""

import json
import sys

from krake.data import core, infrastructure, kubernetes


def krake_class(kind):
    for module in (core, infrastructure, kubernetes):
        found = getattr(module, kind, None)
        if found is not None:
            return found
    raise LookupError(kind)


def main(path):
    with open(path) as file:
        documents = json.load(file)
    for kind, document in sorted(documents.items()):
        try:
            written = krake_class(kind).deserialize(document).serialize()
        except Exception as error:  # the test shows what Krake said
            print(json.dumps({"kind": kind, "error": repr(error)}))
            continue
        print(json.dumps({"kind": kind, "krake": written}, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
