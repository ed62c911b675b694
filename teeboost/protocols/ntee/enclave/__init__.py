"""N-TEE's enclave program: runs inside, measured with what it imports."""
