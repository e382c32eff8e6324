"""remediator."""
