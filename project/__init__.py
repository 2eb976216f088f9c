"""The host project used for development, the demo and the tests (not shipped)."""
