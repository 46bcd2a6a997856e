"""Fixture plugins registered by tests/conftest.py (`pytest_plugins`): builders of stores, repositories, run
folders, executors' jobs, fake backends and parsed docs. Tests request them by name and import none of them."""
