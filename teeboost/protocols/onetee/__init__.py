"""1-TEE (one enclave, at the active party): ``hosts`` are the parties' host sides; ``enclave/``
is what runs inside, measured."""
