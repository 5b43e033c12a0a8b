"""The cluster agent: one per member cluster, node cache, sampling, commit.

Entry points: ``shoal.agent.server.run_agent`` (async) and ``shoal.agent.server.main``
(argv), which the ``shoal agent`` command calls.
"""
