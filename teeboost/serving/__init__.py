"""Online scoring: ``teeboost serve`` (the active party's HTTP service) and the scorers behind it."""
