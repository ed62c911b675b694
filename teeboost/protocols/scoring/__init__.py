"""Plain and SecureBoost: the active party scores every candidate split of every party, around
one level loop (``level_loop``); nothing here runs in an enclave."""
