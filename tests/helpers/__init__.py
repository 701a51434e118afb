"""What the tests share besides fixtures: constants, runners and builders (conftest.py files hold fixtures and hooks only)."""
