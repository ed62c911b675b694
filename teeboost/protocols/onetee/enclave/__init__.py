"""1-TEE's enclave program and its masking ring: run inside, measured."""
