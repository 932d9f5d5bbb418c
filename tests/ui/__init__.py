"""A package so that this folder's conftest.py is imported as `ui.conftest`: folders without __init__.py all import
theirs as `conftest`, and the last one loaded would shadow tests/conftest.py for `from conftest import REPO`."""
