"""Run the Infrastructure Manager's REST server (IM from PyPI) for a test.

Run with the python of ``scripts/im-env``: ``python im_server.py PORT DATA_DIR``. IM
reads its settings from fixed paths; this sets them in its ``Config`` instead:
REST on 127.0.0.1:PORT, its database and log in DATA_DIR, quick state updates.
"""

import sys
from pathlib import Path

from IM.config import Config

port, data = int(sys.argv[1]), Path(sys.argv[2])
Config.ACTIVATE_REST = True
Config.REST_ADDRESS = "127.0.0.1"
Config.REST_PORT = port
Config.DATA_DB = f"sqlite://{data / 'inf.dat'}"
Config.LOG_FILE = str(data / "im.log")
Config.VM_INFO_UPDATE_FREQUENCY = 1
Config.CONFMAMAGER_CHECK_STATE_INTERVAL = 1
Config.CHECK_CTXT_PROCESS_INTERVAL = 1
sys.argv = sys.argv[:1]

from IM.im_service import main  # noqa: E402  (after the settings, which it reads at import)

main()
