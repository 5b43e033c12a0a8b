"""Helpers that drive Shoal as its users do, shared by the tests and the benches.

They live in the package (as ``kopf.testing`` does) so that benches need not
import the test suite, and so that they run the very ``shoal`` commands users run.
"""
