"""RescheduleTasks: applications re-placed on demand, with progress and per-target results."""
