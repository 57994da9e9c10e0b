"""The guard's framework adapters, each run with the framework itself on a live control plane."""
