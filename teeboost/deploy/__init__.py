"""Running each party as its own process or host: configuration, services, the driver."""
