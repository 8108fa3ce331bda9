"""Compatibility knowledge as data: YAML tables in compat_tables/, loaded and validated here.

``loader.load_tables()`` gives the shipped tables (extended by ``ENVDOCTOR_TABLES`` and
``--tables``); ``tables.CompatTables()`` is the empty set, for callers that have no tables (rules
then say nothing). Import from the modules: this package imports nothing, so the start-up probe
pays for neither the YAML loader nor packaging.
"""
