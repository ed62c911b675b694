"""Role logic of the active and passive parties, driven only by messages."""
