"""Widgets: what the reader sees and touches — the viewer, detail view, overlay drawing, side panels, charts, file
list, slice bar, status bar, notices and dialogs. A widget says what the reader asked for through signals and is
set through intent methods; it decides nothing and starts no work, so it imports only other widgets and state/,
never workers/, controllers/ or the shell."""
