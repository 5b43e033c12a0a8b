"""The fleet pipeline of ``shoal scheduler``: pods onto nodes across clusters.

queue (priority, then age; back-off) → sampling (Cp % of the agents, Np of
their nodes, a deadline each) → decision (merge, filter, score, keep the k
best) → commit (MultiBind through the agents) → status.
"""
