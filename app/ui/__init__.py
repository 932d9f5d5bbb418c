"""The viewer, `seglens`: the only package that imports Qt. Its rooms go one way (pyproject.toml's `ui-rooms`): the
shell at this package's root builds the window and wires it → controllers decide → workers run off the GUI thread →
widgets show and report intents → state holds plain records."""
