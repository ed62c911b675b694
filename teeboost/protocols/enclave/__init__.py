"""Runs inside every enclave program, and is measured into it: the attested handshake and
session, the channel-record framing, the enclave tree's bookkeeping, and the row-set and
partition codecs (which the host protocols speak too). Nothing in this package imports a
host-only module (import contracts in pyproject.toml)."""
