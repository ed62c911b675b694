"""Split-finding protocols. Each module holds both roles' sides of one protocol."""
