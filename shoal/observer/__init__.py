"""The cluster observer: each member cluster's health, nodes and custom resources."""
