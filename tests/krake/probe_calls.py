"""One call of Krake's client in a probe, reported as one JSON line:
``{"call": ..., "ok": true}`` (with ``"result"``, what ``show`` picks of it, when ``show``
is given) or ``{"call": ..., "ok": false, "error": ...}``. Every failure is reported and the
probe goes on. This file must stay valid Python 3.8: it runs in Krake's virtualenv.
"""

import json
import traceback

CALLED = set()  # the labels called so far


async def call(label, coro, show=None):
    CALLED.add(label)
    try:
        result = await coro
    except Exception as error:  # every failure is reported, the probe goes on
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        print(json.dumps({"call": label, "ok": False, "error": detail[-600:]}), flush=True)
        return None
    line = {"call": label, "ok": True}
    if show is not None:
        line["result"] = show(result) if result is not None else None
    print(json.dumps(line), flush=True)
    return result
