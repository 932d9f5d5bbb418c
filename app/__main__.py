"""`python -m app` starts the viewer."""

import sys

from app.ui.app import main

sys.exit(main())
