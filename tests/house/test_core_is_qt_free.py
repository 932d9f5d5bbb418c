"""The core and the CLI never import Qt, checked at run time with PySide6 made unimportable.

The import contracts in pyproject.toml (`lint-imports`, run by .ci/run) check every import statement, inside
functions too; this probe also catches what a static reading cannot (an import by name, a plugin) by really
importing every core module and running the CLI's doctor.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

PROBE = """
import sys, importlib, pkgutil
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'shiboken6', 'PyQt5', 'PyQt6') or name.startswith('app.ui'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import app, app.cli, app.errors, app.logs, app.paths
for pkg in ('app.inference', 'app.io', 'app.runs', 'app.serve'):
    module = importlib.import_module(pkg)
    for info in pkgutil.walk_packages(module.__path__, prefix=f'{pkg}.'):
        importlib.import_module(info.name)
from app.inference.runtime import diagnostics, doctor
diagnostics.versions(); doctor.decide(doctor.gather())
print('ok', sorted(m for m in sys.modules if m.startswith('app')))
"""


def test_core_and_cli_import_without_qt():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for module in ("app.inference.image.pipeline", "app.inference.runtime.doctor", "app.runs.folder.batch",
                   "app.runs.station.sinks.mqtt", "app.serve.server", "app.cli", "app.logs"):
        assert f"'{module}'" in done.stdout
