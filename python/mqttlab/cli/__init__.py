"""Command line interface: a thin shell over the library."""
