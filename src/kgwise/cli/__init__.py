"""The ``kgwise`` command line: thin commands over the library."""
