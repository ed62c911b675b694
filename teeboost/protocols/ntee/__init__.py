"""N-TEE (an enclave at every party): ``hosts`` are the parties' host sides; ``enclave/`` is
what runs inside, measured."""
