"""Workers: what runs off the GUI thread. The inference worker (a QObject on its own QThread) and its helpers, the
display (windowing) worker, the thread start/stop pattern, and the per-input work they do (views of a result,
ground truth, the review report). They talk to the window only through signals carrying state/'s records; they may
use a widget module's drawing helper (the QImage conversion in widgets/overlay.py) but never controllers/ or the
shell."""
