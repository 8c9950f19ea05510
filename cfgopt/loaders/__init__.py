"""Consumer-parity loaders: each reads a file the way the tool that consumes it does, keeping spans."""
