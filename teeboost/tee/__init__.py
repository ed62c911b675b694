"""Trusted execution: the enclave interface, attestation, attested channels and sealing.

Only a *simulated* backend exists (no SGX here): enclave code runs in its own OS process
and signs quotes with a simulated platform key. It behaves like the real thing at the
protocol level and says "simulated" wherever it reports; it gives no hardware isolation.
"""
