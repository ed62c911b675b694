"""Strict mode (the whole run inside enclaves): ``hosts`` are the parties' host sides (they
relay sealed records and keep what is published); ``enclave/`` is everything that runs inside,
measured: the program, the trainer, a passive party's state, the row ledger, the consent check
and the messages both sides speak."""
