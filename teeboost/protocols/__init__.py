"""Split-finding protocols, one package per family: ``scoring`` (plain, SecureBoost), ``ntee``,
``onetee`` and ``strict``. Inside each enclave family, ``hosts`` is what a party's host runs
and ``enclave/`` what runs inside its enclave (exactly what the loader measures); ``enclave/``
at this level is what every enclave program shares. ``messages`` are the protocol messages
between parties' hosts; ``env`` starts and attests enclaves for a host."""
