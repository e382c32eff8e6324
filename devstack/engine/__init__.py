"""fedplace-engine: an OPA-REST-compatible policy engine on regorus, for the devstack."""
