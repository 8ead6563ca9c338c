"""anebundle: converts a checkpoint into an anechat Core ML bundle, and
proves on Linux, with a reference interpreter of the saved packages, that
the bundle computes what the CPU backend computes. See ../README.md."""
