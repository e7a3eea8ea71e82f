"""The package version, in a module of its own so that anything may import it without importing the API."""

__version__ = "0.1.0"
