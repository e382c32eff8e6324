"""Views of what the policies decide, for people (the `fedplace` insight commands)."""
