"""Workers: what runs off the GUI thread, QObjects each on its own QThread, started and stopped one way
(threads.py): the inference worker (worker.py) with its collaborators (worker_*: opening a session, Run on all and
the review report, whole-volume counts, 3D runs, slices' masks) and the views of a result it makes, the display
(windowing) worker, the slice preview, the prompt worker and its propagation, the PACS worker and its sends, the
station worker and its painter, the calibration worker and the remote dialog's probe. They talk to the window only
through signals carrying state/'s records; they may use a widget module's drawing helper (the QImage conversion in
widgets/overlay.py) but never controllers/ or the shell."""
