"""Cryptography: additively homomorphic encryption (Paillier), fixed-point slot packing,
and the process pool that spreads big-integer work over cores. Built on gmpy2 (GMP)."""
