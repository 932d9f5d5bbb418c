"""The PACS tests (a package, so its conftest is pacs.conftest and never shadows tests/conftest.py as `conftest`)."""
