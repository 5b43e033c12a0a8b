"""The garbage collector: cascading deletion of owned objects, and expired events."""
