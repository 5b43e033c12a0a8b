"""A copy of an application on one member cluster: how it is applied, pruned, observed and
reported. Below the features: the hub's kube controller and a member cluster's agent run the
same ``Applier`` (``shoal.copies.applier``), which reads and writes that cluster only."""
