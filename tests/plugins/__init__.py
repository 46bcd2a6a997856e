"""Fixture plugins registered by tests/conftest.py (`pytest_plugins`): builders of stores, repositories, run
folders, executors' jobs, fake backends and parsed docs. Tests request them by name; they import nothing
from here but types for annotations."""
