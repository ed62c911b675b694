"""What runs inside a strict enclave (and is measured into it)."""
