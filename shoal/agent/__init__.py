"""The cluster agent: one per member cluster, node cache, sampling, commit.

Served by ``shoal.agent.server`` (``start_agent``, ``run_agent``); its process,
``shoal agent``, is assembled in ``shoal.system.agent``.
"""
