"""How long idle HTTP connections live between Shoal's servers and its clients.

A client drops an idle connection well before the server does: a client whose task
resumes seconds after its answer (a loaded event loop) must not send on a connection
the server is closing (a reset, or "server disconnected", for a request that never
arrived). The margin is therefore wide, not a second.
"""

KEEP_ALIVE = 30.0  # seconds a server keeps an idle keep-alive connection open
CLIENT_KEEP_ALIVE = 4.0  # seconds a client reuses one
