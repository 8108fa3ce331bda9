"""Fixtures of the hostile tests (see users.py)."""

from tests.hostile.users import shared_dir

__all__ = ["shared_dir"]
