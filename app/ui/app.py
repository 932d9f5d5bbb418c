"""`seglens`: start the viewer. Heavy modules (numpy, onnxruntime) load on the worker, after the window shows.

    seglens [PATH...] [--model MODEL] [--device auto|cpu|cuda[:N]] [--self-test]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

STARTED = time.perf_counter()
log = logging.getLogger("app.ui")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="seglens", description="SegLens viewer: model results over images.")
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="images or folders to open")
    parser.add_argument("--model", type=Path, help="ONNX model or a bundled model's name (default: the last one used, "
                                                   "else the demo model)")
    parser.add_argument("--device", help="auto | cpu | cuda | cuda:N (default: the last one used, else auto)")
    parser.add_argument("--self-test", action="store_true",
                        help="open the window, run the default model on the first sample, print JSON and exit")
    parser.add_argument("--settings", type=Path, help=argparse.SUPPRESS)  # an .ini file (tests, benchmarks)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from app.paths import cache_own_bytecode

    cache_own_bytecode()  # before the viewer's own modules load
    args = parse_args(argv)
    if args.model is not None:  # before any window: an unknown name is one line and exit 2, like seglens-cli
        from app.errors import ModelError, shown
        from app.inference.describe.bundled import resolve_model

        try:
            args.model = resolve_model(args.model)
        except ModelError as exc:
            print(f"error: {shown(exc)}", file=sys.stderr)
            return 2
    with _collection_paused():
        app, window, held = _show_window(args)
    shown_ms = (time.perf_counter() - STARTED) * 1000
    log.info("window shown after %.0f ms", shown_ms)
    self_test = SelfTest(app, window, shown_ms) if args.self_test else None  # listening before anything is asked
    # The model is asked for once the window is painted: asked for before it, the worker's imports (numpy,
    # onnxruntime, OpenCV, ~150 ms holding the GIL) delay the paint — on X the window stayed black ~0.1 s after it
    # was mapped — and the first overlay comes no sooner (docs/PERFORMANCE.md): painting needs the GIL too.
    from app.ui.first_paint import after_first_paint

    after_first_paint(window, lambda: _load_initial(window, args, held))
    return self_test.run() if self_test is not None else app.exec()


def _show_window(args: argparse.Namespace):
    """Logging, the application, its icon and the window, shown: (QApplication, MainWindow, the log's HeldRecords:
    the file opens after the first paint, what is logged before it is held)."""
    from app.logs import hold_records

    held = hold_records()
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("SegLens")
    app.setOrganizationName("SegLens")
    set_app_identity(app)
    _install_error_handlers(held.open_file)  # an uncaught exception opens the log file first
    settings = QSettings(str(args.settings), QSettings.Format.IniFormat) if args.settings else QSettings()
    window = _create_window(args, settings)
    window.persist_settings = not args.self_test
    window.show()
    return app, window, held


@contextlib.contextmanager
def _collection_paused():
    """No cyclic garbage collection until the window shows: start-up makes ~100 k objects that live as long as the
    app (modules, classes, Qt types and enums, widgets), and the collector scanned them ~60 times (~5 ms before the
    window). Once shown they are frozen — left out of later collections, as they would survive them — and the
    collector runs as usual. On a failure nothing is frozen (tests call main() in their own process)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except BaseException:
        if enabled:
            gc.enable()
        raise
    gc.freeze()
    if enabled:
        gc.enable()


WINDOW_ICON_MAX = 64


def set_app_identity(app) -> None:
    """The name and icon docks and task bars show; the desktop file name matches packaging's seglens.desktop."""
    from PySide6.QtGui import QIcon

    from app.paths import icon_files

    app.setApplicationDisplayName("SegLens")
    app.setDesktopFileName("seglens")
    icon = QIcon()
    # up to 64 px: X11 copies every size into the window's _NET_WM_ICON as it is shown, and the 128–512 px ones
    # cost ~10 ms of start-up there (measured); docks and menus take the large icon from seglens.desktop
    for path in icon_files():
        if int(path.stem.rsplit("-", 1)[-1]) <= WINDOW_ICON_MAX:
            icon.addFile(str(path))
    if not icon.isNull():
        app.setWindowIcon(icon)


def _create_window(args: argparse.Namespace, settings):
    from app.paths import default_model
    from app.ui.main_window import MainWindow

    model = args.model
    if model is None and not args.self_test:
        saved = settings.value("model", "", str)
        model = Path(saved) if saved and Path(saved).is_file() else None
    model = model or default_model()
    device = args.device or ("auto" if args.self_test else None)
    # what its first paint does not need is built after it (_load_initial): ~10 ms sooner on screen
    return MainWindow(settings=settings, model_path=model, device=device, finish_later=True)


def _load_initial(window, args: argparse.Namespace, held) -> None:
    from app.paths import default_samples
    from app.ui.controllers.loader import own_samples

    held.open_file()  # the log file opened, what was logged before the first paint written into it
    window.finish()  # the groups hidden at start, the controllers, the worker threads, the menus' actions
    window.open_model()
    # no paths: the model's own samples (ct_demo's CT series, not the surface photos under lung and bone labels)
    window.add_paths(args.paths or [own_samples(window.model_path, []) or default_samples()])


class SelfTest:
    """`--self-test`: the default model on the first sample; checks the overlay was painted, prints one JSON line."""

    def __init__(self, app, window, shown_ms: float) -> None:
        from PySide6.QtCore import QTimer

        self.app, self.window = app, window
        self.outcome: dict = {"ok": False, "time_to_window_ms": round(shown_ms, 1),
                              "window_shown_unix": time.time() - (time.perf_counter() - STARTED - shown_ms / 1000)}
        window.model_changed.connect(lambda _summary: self.outcome.setdefault(
            "time_to_model_ready_ms", round((time.perf_counter() - STARTED) * 1000, 1)))
        window.overlay_shown.connect(self.on_shown)
        window.model_failed.connect(self.finish)
        window.image_failed.connect(lambda _path, message: self.finish(message))
        QTimer.singleShot(120_000, lambda: self.finish("timed out after 120 s"))

    def run(self) -> int:
        self.app.exec()
        import json

        self.outcome.pop("done", None)
        print(json.dumps(self.outcome), flush=True)
        return 0 if self.outcome["ok"] else 1

    def on_shown(self, path: str) -> None:
        view = self.window.cached_view(path)
        painted = self.window.viewer.overlay_item.pixmap()
        self.outcome.update(time_to_first_overlay_ms=round((time.perf_counter() - STARTED) * 1000, 1), image=path,
                            first_overlay_unix=time.time(),
                            stage_ms={k: round(v, 2) for k, v in view.result.timings.items()} if view else {})
        if view is not None and view.result.mask is not None:
            self.outcome["overlay_painted"] = not painted.isNull() and painted.width() > 0
            self.outcome["classes_found"] = int((view.result.class_pixels()[1:] > 0).sum())
            self.outcome["ok"] = self.outcome["overlay_painted"]
        else:
            self.outcome["ok"] = view is not None
        self.finish(None if self.outcome["ok"] else "the overlay was not painted")

    def finish(self, error: str | None = None) -> None:
        if self.outcome.get("done"):
            return
        self.outcome["done"] = True
        summary = self.window.summary
        if summary is not None:
            self.outcome.update(provider=summary.info.provider, fallback_reason=summary.info.fallback_reason,
                                model=summary.spec.name, load_ms=round(summary.info.load_ms, 1),
                                first_run_ms=round(summary.info.first_run_ms, 1) or None)  # None: the image warmed
        if error:
            self.outcome["error"] = error
        self.window.close()
        self.app.quit()


def _install_error_handlers(log_at: Path | Callable[[], Path | None] | None) -> None:
    """Uncaught exceptions go to the log and a dialog with the log path, instead of vanishing. `log_at`: the log file,
    or what opens it (HeldRecords.open_file, before the first paint) and says where it is."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    def excepthook(kind, value, tb) -> None:
        from app.logs import log_exception

        log_path = log_at() if callable(log_at) else log_at
        # the type and the frames at CRITICAL, the message (a KeyError of a patient-named path) at DEBUG only
        log_exception(log, logging.CRITICAL, "uncaught exception", value.with_traceback(tb))
        try:
            from PySide6.QtWidgets import QApplication, QMessageBox

            if QApplication.instance() is not None and not _headless():
                QMessageBox.critical(None, "unexpected error — SegLens",
                                     f"{kind.__name__}: {value}\n\nDetails were written to:\n{log_path}")
        except Exception:
            pass
        if sys.__stderr__ is not None:
            sys.__stderr__.write(f"SegLens: unexpected error {kind.__name__}: {value} (log: {log_path})\n")

    def qt_messages(mode, context, message) -> None:
        level = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
                 QtMsgType.QtWarningMsg: logging.WARNING}.get(mode, logging.ERROR)
        logging.getLogger("qt").log(level, "%s", message)

    sys.excepthook = excepthook
    qInstallMessageHandler(qt_messages)


def _headless() -> bool:
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.platformName() in ("offscreen", "minimal")


if __name__ == "__main__":
    sys.exit(main())
