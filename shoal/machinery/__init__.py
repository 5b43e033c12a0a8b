"""The machinery every part of Shoal shares: Kubernetes quantities and resource amounts,
selectors, patches, TLS, the name grammar and JSON types.

It sits below every feature (the model, the store, the API, the scheduler, the agents, the
kube controller and the simulated clusters) and imports none of them: a primitive is written
here once, and each feature uses it.
"""
