"""The ``disco`` command line."""
