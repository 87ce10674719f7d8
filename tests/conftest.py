"""Test-suite root: makes ``tests/`` importable (``shared_data``) for every test folder."""
