"""Plaintext gradient-boosting engine: imports neither crypto, enclaves nor transport."""
