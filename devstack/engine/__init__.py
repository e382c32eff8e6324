"""fedplace-engine: an OPA-REST-compatible policy engine on OPA's own compiler and evaluator, for the devstack."""
