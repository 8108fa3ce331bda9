"""The seam: the only package that touches the OS, subprocesses and native libraries."""
