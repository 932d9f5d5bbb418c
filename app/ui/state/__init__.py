"""State: plain records and rules with no widget in them — the view state, the typed request/result messages that
cross the thread boundary, mask editing, and what is remembered per model. The bottom room: it imports nothing else
from app.ui, so any room may use it."""
