"""Whether this code runs on a host, where the compiled kernels are used, or in an enclave.

A host imports teeboost from files, so numba caches a kernel's machine code beside its module
and compiles it once per build. An enclave's measured loader runs the source with no file: a
kernel would be compiled at every launch (0.9 s for the three, docs/benchmarks.md), more than
it saves below about 1e5 rows, so enclaves keep the numpy code, which gives the same sums.
"""

ON_HOST = "__file__" in globals()
