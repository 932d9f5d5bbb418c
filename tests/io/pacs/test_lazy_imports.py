"""The PACS libraries load only when a PACS is spoken to: start-up and `--version` never pay for them."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_pacs_package_loads_no_networking_library() -> None:
    code = ("import sys, app.io.pacs, app.io.pacs.nodes, app.io.pacs.cache, app.io.pacs.client; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pynetdicom', 'dicomweb_client', 'keyring', "
            "'requests', 'platformdirs'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
