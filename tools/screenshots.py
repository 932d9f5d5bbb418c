"""The documentation's pictures, every one made here from the current code, and the check that none is stale.

    python tools/screenshots.py                  # every picture, under Xvfb + openbox, and docs/screenshots.json
    python tools/screenshots.py NAME...          # only those (e.g. station_ng.png); the others' entries are kept
    python tools/screenshots.py --stale          # only those --check finds stale or missing
    python tools/screenshots.py --list           # the pictures: file, screen, state
    python tools/screenshots.py --check          # exit 1 naming each stale picture (no X server needed)

Each picture is one state of the viewer (a scene below) on a virtual screen of a stated size (1280×720 for most,
1920×1080 where the page says so): an Xvfb server with openbox as its window manager, the viewer opened as on a
first start (fresh settings, so the window takes the size it takes on that screen), driven to the state, and the
window grabbed WITH its frame — `import -window root` cropped to the frame Qt reports, so popups and the title
bar come out as the screen shows them. Each scene runs in its own process with scratch settings, data, config and
cache folders (nothing of the user's is read or written) on the CPU.

docs/screenshots.json says, per picture: the screen, the picture's size, the state it shows, the sources that draw
it and a hash over them (the viewer's modules — all of app/ui and app/inference/describe — the models and samples the
scene opens, and the scene's own code), and the hash of the PNG. `--check` recomputes both: a picture whose sources
changed since it was made, or a PNG changed by hand, is stale; so is a picture a page shows that the manifest does
not hold, or an entry no page shows. Needs: Xvfb, openbox, ImageMagick (`import`), and for the review report
chromium-headless-shell.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
MANIFEST = DOCS / "screenshots.json"
PAGES = (REPO / "README.md", *sorted(DOCS.glob("*.md")))
VIEWER = ("app/ui", "app/inference/describe")  # what draws every window picture
SMALL, LARGE = (1280, 720), (1920, 1080)
SCENE_TIMEOUT_S = 420
SCRATCH = Path(tempfile.gettempdir()) / "seglens-screens"  # a scene's settings, data, config and cache
PNG_LINK = re.compile(r"\]\(([^)\s]+\.png)\)")


@dataclass(frozen=True)
class Shot:
    """One picture: its file under docs/, the screen it is taken on, what it shows, the scene that makes it (a
    function below, given `args`) and what it opens beyond the viewer (models, samples, other code)."""

    file: str
    screen: tuple[int, int]
    state: str
    scene: str
    sources: tuple[str, ...] = ()
    args: dict[str, Any] = field(default_factory=dict)
    viewer: bool = True  # drawn by the viewer's modules (not: the HTML report in a browser)

    def all_sources(self) -> tuple[str, ...]:
        return (*(VIEWER if self.viewer else ()), *self.sources)


def _both(file: str, state: str, scene: str, sources: tuple[str, ...], **args: Any) -> tuple[Shot, Shot]:
    """The picture at 1280×720 (FILE) and at 1920×1080 (FILE with _1920)."""
    large = file.replace(".png", "_1920.png")
    return (Shot(file, SMALL, state, scene, sources, args), Shot(large, LARGE, state, scene, sources, args))


SURFACE = ("models/surface_defects.onnx", "models/surface_defects.yaml", "resources/samples/surface")
ANOMALY = ("models/surface_anomaly.onnx", "models/surface_anomaly.yaml", "resources/samples/anomaly")
NUCLEI = ("models/nuclei.onnx", "models/nuclei.yaml", "resources/samples/nuclei")
CT = ("models/ct_demo.onnx", "models/ct_demo.yaml", "resources/samples/ct")
CT3D = ("models/ct3d_demo.onnx", "models/ct3d_demo.yaml", "resources/samples/ct3d")
NNUNET = ("tests/data/nnunet/Dataset901_CTPhantom", "app/runs/imports/nnunet", "app/inference/volume3d/nnunet")
PROMPT = ("models/prompt_demo.yaml", "models/prompt_demo_encoder.onnx", "models/prompt_demo_decoder.onnx")

# a constant Ultralytics segment head (tests/yolo_models.py) whose objects sit on the sample's pits and stain
INSTANCES = ("models/surface_instances.onnx", "models/surface_instances.yaml",
             "resources/samples/surface/surface_04_mixed.jpg")
STATION = (*ANOMALY, "app/runs/station")
PACS = (*CT, "tests/io/pacs/orthanc.py", "app/io/pacs")
REMOTE = (*NUCLEI, "tests/remote_mocks.py")
CALIBRATE = ("models/surface_anomaly.onnx", "models/surface_anomaly.yaml", "tests/calibrate_fixtures.py",
             "app/runs/calibrate")

SHOTS: tuple[Shot, ...] = (
    Shot("screenshot.png", LARGE, "the demo model (surface defects) on the first sample, as `seglens` opens",
         "main_window", SURFACE),
    Shot("toolbar.png", SMALL, "the demo model on the first sample: title bar, menus, toolbar, panel, status bar",
         "main_window", SURFACE),
    Shot("decide.png", SMALL, "the anomaly model's probability layer after Run on all (scores only): colour bar, "
         "NG badges, the folder's score histogram", "decide", ANOMALY),
    Shot("big_tiled.png", SMALL, "a 9000×9000 picture at 1:1 through the nuclei model in 256-px tiles",
         "big_tiled", NUCLEI),
    Shot("edit_mode.png", SMALL, "edit mode on a nuclei sample: a stroke painted, the brush ring", "edit_mode",
         NUCLEI),
    Shot("difference.png", SMALL, "a saved correction as the reference: the difference layer", "difference",
         NUCLEI),
    Shot("split_view.png", SMALL, "model A (nuclei) | model B (nuclei_fp16), split view", "split_view",
         (*NUCLEI, "models/nuclei_fp16.onnx", "models/nuclei_fp16.yaml")),
    Shot("smart_proposal.png", SMALL, "the Smart tool at 300 %: a box, a click inside and one outside, the "
         "proposal previewed", "smart", (*NUCLEI, *PROMPT), {"accepted": False}),
    Shot("smart_accepted.png", SMALL, "the Smart tool's proposal added with Enter", "smart", (*NUCLEI, *PROMPT),
         {"accepted": True}),
    Shot("smart_propagated.png", SMALL, "CT slice 22 reached by Propagate ▼ from a lung accepted on slice 16: the "
         "difference layer", "smart_propagated", (*CT, *PROMPT)),
    Shot("volume.png", LARGE, "the CT sample series through ct_demo: slice bar, orientation letters, mL per class",
         "volume", CT),
    Shot("three_planes.png", LARGE, "the CT sample in three planes, the crosshair in the right lung",
         "three_planes", CT),
    Shot("three_planes_1280.png", SMALL, "the CT sample in three planes, the crosshair in the right lung",
         "three_planes", CT),
    Shot("images/viewer3d_three_planes.png", SMALL, "ct3d_demo's result in three planes, the crosshair on "
         "lesion 1 from the lesion list", "viewer3d", CT3D),
    *_both("images/nnunet_three_planes.png", "an nnU-Net folder imported (the CT phantom's 3d_fullres, folds 0 and "
           "1) and its result on a held-out volume in three planes, the crosshair in the liver", "nnunet_imported",
           NNUNET),
    *_both("planes_3d_running.png", "three planes while ct3d_demo runs over the volume: its progress",
           "planes_3d_running", CT3D),
    Shot("calibrate_dialog.png", SMALL, "Model ▸ Calibrate limits…: 60 clean and 100 defective surfaces, the "
         "result", "calibrate", CALIBRATE),
    Shot("calibrate_dialog_1920.png", LARGE, "Model ▸ Calibrate limits…: 60 clean and 100 defective surfaces, "
         "the result", "calibrate", CALIBRATE),
    Shot("remote_dialog.png", SMALL, "Model ▸ Device ▸ Remote server… after Test connection (mock server)",
         "remote", REMOTE, {"subject": "dialog"}),
    Shot("remote_device.png", SMALL, "the nuclei model on the mock server: the remote badge, split latency",
         "remote", REMOTE, {"subject": "window"}),
    *_both("remote_failed.png", "the remote badge after a picture failed (the server busy through its retries)",
           "remote", REMOTE, subject="failed"),
    Shot("station_running.png", SMALL, "the Station view while parts pass: an OK, the strip of NG and REVIEW parts",
         "station", STATION, {"moment": "running"}),
    Shot("station_ng.png", SMALL, "the Station view on an NG part, the strip filled", "station", STATION,
         {"moment": "ng"}),
    Shot("station_stalled.png", SMALL, "a stalled source: the ALARM bar, the last OK greyed", "station", STATION,
         {"moment": "stalled"}),
    *_both("station_error_stalled.png", "an unreadable part's ERROR, then the source stalled", "station", STATION,
           moment="error_stalled"),
    Shot("pacs_search.png", SMALL, "File ▸ Open from PACS… (a real Orthanc): a second search, the patient's two "
         "studies, the chosen study's series", "pacs", PACS, {"subject": "search"}),
    Shot("pacs_search_1920.png", LARGE, "File ▸ Open from PACS… (a real Orthanc): a second search, the patient's "
         "two studies, the chosen study's series", "pacs", PACS, {"subject": "search"}),
    Shot("pacs_opened.png", SMALL, "the retrieved series open through ct_demo: whole-volume mL, 3D components",
         "pacs", PACS, {"subject": "opened"}),
    Shot("instances.png", SMALL, "the instance demo (YOLOv8-seg layout) on a surface sample: each instance outlined "
         "in its class colour with its score, the legend's counts, the Instances list", "instances", INSTANCES,
         {"moment": "overlay"}),
    Shot("instances_chosen.png", SMALL, "an instance chosen in the Instances list: zoomed to, marked", "instances",
         INSTANCES, {"moment": "chosen"}),
    Shot("instances_corrected.png", SMALL, "a corrected picture: a scratch found in four pieces deleted and painted "
         "with the brush as one instance", "instances", INSTANCES, {"moment": "corrected"}),
    Shot("review_report.png", (1400, 1000), "the HTML review report of tools/review_report_demo.py in headless "
         "Chromium", "review_report", (*SURFACE, "app/runs/review", "tools/review_report_demo.py"), viewer=False),
)


# ---------------------------------------------------------------- the manifest and the check (no Qt, no X)

def _files(source: str) -> list[Path]:
    path = REPO / source
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise SystemExit(f"screenshots: source {source} does not exist")
    return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _scene_code(name: str) -> str:
    """The scene function's own source text (read, not imported: the check needs no Qt)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == f"scene_{name}":
            return ast.get_source_segment(Path(__file__).read_text(encoding="utf-8"), node) or ""
    raise SystemExit(f"screenshots: no scene_{name} in {Path(__file__).name}")


def sources_hash(shot: Shot) -> str:
    """SHA-256 over the sources' files (path and bytes, in path order), the scene's code and its arguments."""
    digest = hashlib.sha256()
    for path in sorted({p for source in shot.all_sources() for p in _files(source)}):
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(_scene_code(shot.scene).encode())
    digest.update(json.dumps([shot.screen, shot.args], sort_keys=True).encode())
    return digest.hexdigest()


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def entry(shot: Shot) -> dict[str, Any]:
    png = DOCS / shot.file
    return {"screen": f"{shot.screen[0]}x{shot.screen[1]}", "size": list(png_size(png)), "state": shot.state,
            "scene": shot.scene, "sources": list(shot.all_sources()), "sources_sha256": sources_hash(shot),
            "png_sha256": hashlib.sha256(png.read_bytes()).hexdigest()}


def read_manifest() -> dict[str, dict[str, Any]]:
    if not MANIFEST.is_file():
        return {}
    return dict(json.loads(MANIFEST.read_text(encoding="utf-8"))["pictures"])


def write_manifest(pictures: dict[str, dict[str, Any]]) -> None:
    known = {shot.file for shot in SHOTS}
    body = {"made_by": "tools/screenshots.py (python tools/screenshots.py --check tells which are stale)",
            "pictures": {name: pictures[name] for name in sorted(pictures) if name in known}}
    MANIFEST.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def shown_pictures() -> dict[str, list[str]]:
    """docs/-relative PNG paths the README and the docs pages show (or link), each with the pages that do."""
    shown: dict[str, list[str]] = {}
    for page in PAGES:
        for target in PNG_LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path = (page.parent / target).resolve()
            if DOCS in path.parents:
                shown.setdefault(path.relative_to(DOCS).as_posix(), []).append(page.name)
    return shown


def problems() -> list[str]:
    """One line per stale, missing or unshown picture; empty when every picture is fresh."""
    manifest, shown = read_manifest(), shown_pictures()
    lines = [f"docs/{name}: shown by {', '.join(pages)} but not made by tools/screenshots.py (not in the manifest)"
             for name, pages in sorted(shown.items()) if name not in manifest]
    lines += [f"docs/{name}: in the manifest but no page shows it" for name in sorted(manifest) if name not in shown]
    by_file = {shot.file: shot for shot in SHOTS}
    for name, recorded in sorted(manifest.items()):
        lines += _stale(name, recorded, by_file.get(name))
    return lines


def _stale(name: str, recorded: dict[str, Any], shot: Shot | None) -> list[str]:
    png = DOCS / name
    if shot is None:
        return [f"docs/{name}: in the manifest but tools/screenshots.py has no such picture"]
    if not png.is_file():
        return [f"docs/{name}: missing"]
    if hashlib.sha256(png.read_bytes()).hexdigest() != recorded.get("png_sha256"):
        return [f"docs/{name}: the PNG is not the one tools/screenshots.py made (changed by hand?)"]
    if sources_hash(shot) != recorded.get("sources_sha256") or list(shot.all_sources()) != recorded.get("sources"):
        return [f"docs/{name}: stale — its sources ({', '.join(shot.all_sources())}) changed since it was made"]
    return []


def stale_files() -> set[str]:
    """The pictures the tool makes that are stale or missing (what `--stale` makes again)."""
    manifest, by_file = read_manifest(), {shot.file: shot for shot in SHOTS}
    return {name for name, shot in by_file.items()
            if name not in manifest or _stale(name, manifest[name], shot)}


def check() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"{len(found)} picture(s) stale or missing: run `python tools/screenshots.py` (or name them) under "
              "a machine with Xvfb, openbox and ImageMagick, look at them, commit docs/", file=sys.stderr)
        return 1
    print(f"{len(read_manifest())} pictures fresh")
    return 0


# ---------------------------------------------------------------- the X server and the scenes' processes

class Screen:
    """An Xvfb server of one size with openbox on it, for the scenes' processes (DISPLAY)."""

    def __init__(self, size: tuple[int, int]) -> None:
        self.size, self.processes, self.display = size, [], ""

    def __enter__(self) -> Screen:
        width, height = self.size
        try:
            self.display = self._xvfb(width, height)
            _until(lambda: _answers(self.display), "Xvfb")
            self._openbox()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _openbox(self) -> None:
        """openbox on the display, its messages kept for the error; tried again when it does not come up."""
        log = Path(tempfile.gettempdir()) / f"seglens-screens-openbox{self.display.replace(':', '-')}.log"
        for _attempt in range(3):
            with log.open("wb") as messages:
                openbox = subprocess.Popen(["openbox", "--sm-disable"], env={**os.environ, "DISPLAY": self.display},
                                           stdin=subprocess.DEVNULL, stdout=messages, stderr=messages)
            self.processes.append(openbox)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and openbox.poll() is None:
                if _wm_running(self.display):
                    return
                time.sleep(0.1)
            openbox.kill()
        raise SystemExit(f"screenshots: openbox did not start on {self.display}: {log.read_text(errors='replace')}")

    def _xvfb(self, width: int, height: int) -> str:
        """Start Xvfb on a display number it finds free itself (-displayfd: a number another server holds, even
        one whose socket file is gone, is never taken); returns ":N"."""
        read, write = os.pipe()
        try:
            self.processes.append(subprocess.Popen(
                ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp"],
                pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            os.close(write)
            with os.fdopen(read, "rb") as answer:
                number = answer.readline().strip()
        except BaseException:
            os.close(read)
            raise
        if not number.isdigit():
            raise SystemExit("screenshots: Xvfb did not start")
        return f":{number.decode()}"

    def __exit__(self, *_exc: object) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def _answers(display: str) -> bool:
    return subprocess.run(["xprop", "-display", display, "-root", "-len", "0"], capture_output=True).returncode == 0


def _wm_running(display: str) -> bool:
    found = subprocess.run(["xprop", "-display", display, "-root", "_NET_SUPPORTING_WM_CHECK"],
                           capture_output=True, text=True)
    return found.returncode == 0 and "window id" in found.stdout


def _until(done: Callable[[], bool], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: {what} did not start")
        time.sleep(0.1)


def make(shots: Iterable[Shot]) -> int:
    """Run each shot's scene under its screen, then record the made ones in the manifest."""
    shots = list(shots)
    manifest, failed = read_manifest(), []
    for size in sorted({shot.screen for shot in shots}):
        with Screen(size) as screen:
            for shot in (s for s in shots if s.screen == size):
                if _run_scene(shot, screen.display):
                    manifest[shot.file] = entry(shot)
                    write_manifest(manifest)
                else:
                    failed.append(shot.file)
    for name in failed:
        print(f"screenshots: {name} failed (its entry, if any, is left as it was)", file=sys.stderr)
    return 1 if failed else 0


def _run_scene(shot: Shot, display: str) -> bool:
    started = time.monotonic()
    home = SCRATCH  # one fixed folder: the paths a picture shows read the same at every run
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    try:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
               "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
               "SEGLENS_SETTINGS": str(home / "settings.yaml"), "PYTHONPATH": str(REPO)}
        env.pop("SEGLENS_LOG_LEVEL", None)
        png = home.parent / f"seglens-screens-{shot.file.replace('/', '_')}"
        png.unlink(missing_ok=True)
        command = [sys.executable, __file__, "--scene", shot.file, "--scratch", str(home), "--png", str(png)]
        try:
            done = subprocess.run(command, env=env, cwd=REPO, timeout=SCENE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"screenshots: {shot.file}: timed out after {SCENE_TIMEOUT_S} s", file=sys.stderr)
            return False
    finally:
        shutil.rmtree(home, ignore_errors=True)
    ok = done.returncode == 0 and png.is_file()
    if ok:
        (DOCS / shot.file).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(png, DOCS / shot.file)
        width, height = png_size(DOCS / shot.file)
        print(f"{shot.file}: {width}x{height} on {shot.screen[0]}x{shot.screen[1]} "
              f"({time.monotonic() - started:.0f} s)")
    return ok


# ---------------------------------------------------------------- inside a scene's process (Qt from here on)

class Stage:
    """What a scene drives the viewer with: the QApplication, a scratch folder, waits and the grab."""

    def __init__(self, shot: Shot, scratch: Path, png: Path) -> None:
        from PySide6.QtWidgets import QApplication

        self.shot, self.scratch, self.png = shot, scratch, png
        from app.ui.app import set_app_identity

        self.app = QApplication.instance() or QApplication([sys.argv[0]])
        self.app.setApplicationName("SegLens")
        self.app.setOrganizationName("SegLens")
        set_app_identity(self.app)  # the title bar's icon, as `seglens` starts
        self.windows: list[Any] = []

    def window(self, model: str | None = None, inputs: Iterable[str | Path] = (), *, overlay: bool = True,
               settings: str = "settings.ini") -> Any:
        """A MainWindow as on a first start (fresh settings, its own size for this screen), on the CPU, the model
        loaded and the inputs opened; with `overlay`, once the first overlay is on screen."""
        from PySide6.QtCore import QSettings

        from app.ui.main_window import MainWindow

        window = MainWindow(settings=QSettings(str(self.scratch / settings), QSettings.Format.IniFormat),
                            model_path=REPO / model if model else None, device="cpu")
        window.persist_settings = False
        self.windows.append(window)
        shown: list[object] = []
        window.overlay_shown.connect(shown.append)
        window.show()
        self.wait(lambda: window.isVisible() and window.windowHandle() is not None, what="the window")
        if model:
            window.open_model()
            self.wait(lambda: window.summary is not None, what="the model")
        if inputs:
            window.add_paths([REPO / p if not Path(p).is_absolute() else Path(p) for p in inputs])
            if overlay:
                self.wait(lambda: bool(shown), what="the first overlay")
        return window

    def wait(self, done: Callable[[], object], seconds: float = 180, what: str = "the state") -> None:
        deadline = time.monotonic() + seconds
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.shot.file}: timed out waiting for {what}")
            self.app.processEvents()
            time.sleep(0.01)

    def settle(self, seconds: float = 0.6) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.01)

    def grab(self, widget: Any = None) -> None:
        """The window (the first one made, or the top-level window of `widget`) with its frame, as on the screen."""
        top = (widget or self.windows[0]).window()
        top.raise_()
        top.activateWindow()
        self.settle()
        frame = top.frameGeometry().intersected(top.screen().geometry())  # what of it is on the screen
        crop = f"{frame.width()}x{frame.height()}+{frame.x()}+{frame.y()}"
        subprocess.run(["import", "-window", "root", "-crop", crop, "+repage", "-strip", f"png:{self.png}"], check=True)

    def close(self) -> None:
        for window in self.windows:
            window.close()
        self.settle(0.2)


def run_scene(file: str, scratch: Path, png: Path) -> int:
    (shot,) = [s for s in SHOTS if s.file == file]
    stage = Stage(shot, scratch, png)
    globals()[f"scene_{shot.scene}"](stage, **shot.args)
    stage.close()
    return 0


# ---------------------------------------------------------------- the scenes: one function per state

def scene_main_window(stage: Stage) -> None:
    stage.window("models/surface_defects.onnx", ["resources/samples/surface"])
    stage.grab()


def scene_decide(stage: Stage) -> None:
    """The anomaly model's probability layer with its colour bar, after Run on all (scores only): the NG badges
    and the folder's score histogram."""
    window = stage.window("models/surface_anomaly.onnx", ["resources/samples/anomaly"])
    finished: list[object] = []
    window.run_all_finished.connect(lambda *a: finished.append(a))
    window.run_all(None)
    stage.wait(lambda: bool(finished), what="Run on all")
    retuned: list[object] = []
    window.tuner.retuned_shown.connect(retuned.append)
    window.panel.decision.set_layer("probability")
    stage.wait(lambda: bool(retuned), what="the probability layer")
    from app.ui.widgets.decision import FolderScores

    window.panel.reveal(window.panel.findChild(FolderScores))  # scrolled to, as the reader would
    stage.grab()


def scene_volume(stage: Stage) -> None:
    """The CT sample series through ct_demo: the slice bar, orientation letters and each class's mL."""
    window = stage.window("models/ct_demo.onnx", ["resources/samples/ct"])
    shown: list[object] = []
    window.overlay_shown.connect(shown.append)
    window.show_path(window.files.current_path(), 15)
    stage.wait(lambda: bool(shown), what="slice 16")
    stage.wait(lambda: "counting" not in _legend_text(window) and "mL" in _legend_text(window),
               what="the whole volume's mL")
    stage.grab()


def _legend_text(window: Any) -> str:
    from PySide6.QtWidgets import QLabel

    return " ".join(label.text() for label in window.panel.findChildren(QLabel) if label.isVisible())


def _planes(stage: Stage, window: Any) -> Any:
    from PySide6.QtGui import QAction

    (toggle,) = [a for a in window.findChildren(QAction) if a.text().startswith("Three planes")]
    stage.wait(toggle.isEnabled, what="the whole volume counted (Three planes enabled)")
    shown: list[object] = []
    window.volumes.planes_shown.connect(shown.append)
    toggle.trigger()
    stage.wait(lambda: bool(shown), what="the three planes")
    return window.volumes.planes


def scene_three_planes(stage: Stage) -> None:
    """The CT sample in three planes through ct_demo, the crosshair in the right lung (image left)."""
    window = stage.window("models/ct_demo.onnx", ["resources/samples/ct"])
    planes = _planes(stage, window)
    import numpy as np

    depth, _rows, columns = planes.volume.labels.shape
    lung = np.argwhere(np.asarray(planes.volume.labels[depth // 2]) == 1)
    rows, cols = lung[lung[:, 1] < columns // 2].mean(axis=0)  # the lung on the image's left: the patient's right
    planes.set_point(depth // 2, round(rows), round(cols))
    stage.grab()


def scene_viewer3d(stage: Stage) -> None:
    """ct3d_demo's result on the 3D sample in three planes, the crosshair on the largest lesion (lesion list)."""
    window = stage.window("models/ct3d_demo.onnx", ["resources/samples/ct3d/ct3d_sample.nii.gz"])
    planes = _planes(stage, window)
    moved: list[object] = []
    planes.point_changed.connect(lambda *a: moved.append(a))
    lesions = window.panel.lesion_list()
    lesions.show_class(3)  # the lesion class alone (ct3d_demo: background, lung, bone, lesion)
    lesions.click_row(0)
    stage.wait(lambda: bool(moved), what="the crosshair on lesion 1")
    stage.grab()


def scene_nnunet_imported(stage: Stage) -> None:
    """The committed CT phantom's nnU-Net folder imported as a user does (seglens-cli import nnunet), then its result
    on a held-out volume in three planes, the crosshair in the largest liver component."""
    import numpy as np

    from app.cli import main

    data = REPO / "tests/data/nnunet/Dataset901_CTPhantom"
    model = stage.scratch / "imported" / "ct_phantom.onnx"
    folder = data / "nnUNetTrainer_1epoch__nnUNetPlansTiny__3d_fullres"
    if main(["import", "nnunet", str(folder), "--folds", "0,1", "--out", str(model)]) != 0:
        raise RuntimeError("the nnU-Net import failed")
    window = stage.window(str(model), [data / "heldout" / "heldout_001_0000.nii.gz"])
    planes = _planes(stage, window)
    labels = np.asarray(planes.volume.labels)
    liver = np.argwhere(labels == 1)
    d, r, c = np.median(liver, axis=0)
    planes.set_point(round(d), round(r), round(c))
    stage.grab()


def scene_planes_3d_running(stage: Stage) -> None:
    """Three planes of the 3D sample's NIfTI file after ct3d_demo's run, then its DICOM series chosen: the planes
    stay, the run's progress over the canvas. Each model call is slowed to 0.3 s (a slow machine), so the run is
    caught part way."""
    window = stage.window("models/ct3d_demo.onnx", ["resources/samples/ct3d/ct3d_sample.nii.gz",
                                                     "resources/samples/ct3d/series"])
    _planes(stage, window)
    _slow_model_runs(0.3)
    progress: list[Any] = []
    window.worker.volume_progress.connect(progress.append)
    (series,) = [path for path in window.files.paths() if path != window.files.current_path()]
    window.files.select_path(series)
    stage.wait(lambda: any(p.stage == "patches" and p.done * 3 >= p.total for p in progress),
               what="a third of the patches")
    stage.settle(0.3)
    stage.grab()


def _slow_model_runs(seconds: float) -> None:
    import onnxruntime

    run = onnxruntime.InferenceSession.run

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return run(self, *args, **kwargs)

    onnxruntime.InferenceSession.run = slow  # type: ignore[method-assign]


def scene_big_tiled(stage: Stage) -> None:
    """A 9000×9000 picture (the nuclei sample, repeated) at 1:1 through nuclei run in 256-px tiles."""
    import numpy as np
    from PIL import Image

    model = stage.scratch / "nuclei_tiled.onnx"
    shutil.copyfile(REPO / "models/nuclei.onnx", model)
    sidecar = (REPO / "models/nuclei.yaml").read_text(encoding="utf-8").replace("resize: stretch", "resize: tile")
    model.with_suffix(".yaml").write_text(sidecar, encoding="utf-8")
    tile = np.asarray(Image.open(REPO / "resources/samples/nuclei/nuclei_01.png").convert("L"))
    big = np.tile(tile, (9000 // tile.shape[0] + 1, 9000 // tile.shape[1] + 1))[:9000, :9000]
    picture = stage.scratch / "slide_9000.png"
    Image.fromarray(big).save(picture, compress_level=1)
    window = stage.window(str(model), [picture])
    window.viewer.zoom_by(1.0 / window.viewer.zoom())  # 1:1
    window.viewer.centerOn(4500, 4500)
    stage.settle(3.0)
    stage.grab()


def _nuclei_copy(stage: Stage) -> Path:
    """The nuclei samples copied into a scratch folder (its review folder beside it, as for the reader's own)."""
    folder = stage.scratch / "nuclei"
    shutil.copytree(REPO / "resources/samples/nuclei", folder)
    return folder


def _paint(stage: Stage, window: Any, points: list[tuple[float, float]], *, erase: bool = False) -> None:
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    viewport = window.viewer.viewport()
    at = [window.viewer.mapFromScene(QPointF(x, y)) for x, y in points]
    held = Qt.KeyboardModifier.ShiftModifier if erase else Qt.KeyboardModifier.NoModifier
    QTest.mousePress(viewport, Qt.MouseButton.LeftButton, held, at[0])
    for point in at[1:]:
        QTest.mouseMove(viewport, point)
    QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, held, at[-1])
    stage.settle(0.2)


def scene_edit_mode(stage: Stage) -> None:
    """Edit mode on a nuclei sample: the brush ring at image scale over the picture, a stroke painted."""
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    window = stage.window("models/nuclei.onnx", [_nuclei_copy(stage) / "nuclei_01.png"])
    QTest.keyClick(window, Qt.Key.Key_E)
    stage.wait(lambda: window.editor.active, what="edit mode")
    _paint(stage, window, [(60.0 + 4 * i, 60.0 + 2 * i) for i in range(10)])
    QTest.mouseMove(window.viewer.viewport(), window.viewer.mapFromScene(QPointF(120, 90)))
    stage.grab()


def scene_difference(stage: Stage) -> None:
    """A correction saved, then the difference layer against it: what the reader added and removed."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    window = stage.window("models/nuclei.onnx", [_nuclei_copy(stage) / "nuclei_01.png"])
    QTest.keyClick(window, Qt.Key.Key_E)
    stage.wait(lambda: window.editor.active, what="edit mode")
    _paint(stage, window, [(40.0 + 3 * i, 200.0) for i in range(12)])
    _paint(stage, window, [(183.0, 95.0), (186.0, 97.0)], erase=True)
    window.editor.save()
    QTest.keyClick(window, Qt.Key.Key_E)
    retuned: list[object] = []
    window.tuner.retuned_shown.connect(retuned.append)
    window.panel.decision.set_layer("difference")
    stage.wait(lambda: bool(retuned), what="the difference layer")
    stage.grab()


def scene_split_view(stage: Stage) -> None:
    """Model A (nuclei) and model B (nuclei_fp16) on one picture, the split divider between them."""
    window = stage.window("models/nuclei.onnx", ["resources/samples/nuclei/nuclei_02_dense.png"])
    window.open_model_b(REPO / "models/nuclei_fp16.onnx")
    stage.wait(lambda: window.panel.decision.model_b is not None, what="model B")
    window.panel.decision.set_split("ab")
    stage.settle(1.5)
    stage.grab()


def _smart_ready(stage: Stage, window: Any) -> Any:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    QTest.keyClick(window, Qt.Key.Key_S)
    smart = window.editor.smart
    stage.wait(lambda: smart.model_ready is not None, what="the prompt model")
    return smart


def _smart_press(stage: Stage, window: Any, smart: Any, points: list[tuple[float, float]], right: bool = False) -> None:
    """A click (one point) or a drag (several) on the picture; waits for the proposal it makes."""
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    got: list[object] = []
    smart.proposal_shown.connect(lambda *a: got.append(a))
    viewport = window.viewer.viewport()
    at = [window.viewer.mapFromScene(QPointF(x + 0.5, y + 0.5)) for x, y in points]
    button = Qt.MouseButton.RightButton if right else Qt.MouseButton.LeftButton
    QTest.mousePress(viewport, button, Qt.KeyboardModifier.NoModifier, at[0])
    for point in at[1:]:
        QTest.mouseMove(viewport, point)
    QTest.mouseRelease(viewport, button, Qt.KeyboardModifier.NoModifier, at[-1])
    stage.wait(lambda: bool(got), what="the proposal")
    smart.proposal_shown.disconnect()
    stage.settle(0.3)


def scene_smart(stage: Stage, accepted: bool) -> None:
    """The Smart tool at 300 % on a nucleus the model covered only in part: a box, a click inside and one outside,
    the proposal previewed (or, `accepted`, added with Enter)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    window = stage.window("models/nuclei.onnx", [_nuclei_copy(stage) / "nuclei_01.png"])
    smart = _smart_ready(stage, window)
    window.viewer.zoom_by(3.0 / window.viewer.zoom())
    window.viewer.centerOn(183.5, 95.5)
    stage.settle(0.3)
    _smart_press(stage, window, smart, [(170, 82), (183.5, 95.5), (197, 109)])
    _smart_press(stage, window, smart, [(183, 95)])
    _smart_press(stage, window, smart, [(168, 111)], right=True)
    if accepted:
        QTest.keyClick(window, Qt.Key.Key_Return)
        stage.settle(0.5)
    stage.grab()


def scene_smart_propagated(stage: Stage) -> None:
    """A lung accepted on slice 16 of the CT sample and propagated down; slice 22's difference layer."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    folder = stage.scratch / "ct"
    shutil.copytree(REPO / "resources/samples/ct", folder)
    window = stage.window("models/ct_demo.onnx", [folder])
    shown: list[object] = []
    window.overlay_shown.connect(shown.append)
    window.show_path(window.files.current_path(), 15)
    stage.wait(lambda: bool(shown), what="slice 16")
    smart = _smart_ready(stage, window)
    _smart_press(stage, window, smart, [(90, 120)])
    QTest.keyClick(window, Qt.Key.Key_Return)
    stage.settle(0.3)
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    stage.wait(lambda: smart.propagation is not None and not smart.propagation.running, what="the propagation")
    stage.settle(1.0)
    shown.clear()
    window.show_path(window.files.current_path(), 21)
    stage.wait(lambda: bool(shown), what="slice 22")
    retuned: list[object] = []
    window.tuner.retuned_shown.connect(retuned.append)
    window.panel.decision.set_layer("difference")
    stage.wait(lambda: bool(retuned), what="the difference layer")
    stage.grab()


def scene_calibrate(stage: Stage) -> None:
    """Model ▸ Calibrate limits… on a copy of the anomaly model: 60 clean and 100 defective synthetic surfaces,
    half of them held out, the result shown."""
    from app.ui.controllers.calibrator import calibrator_of
    from tests.calibrate_fixtures import copy_demo, write_surfaces

    ok = write_surfaces(stage.scratch / "clean parts", 60, defective=False)
    ng = write_surfaces(stage.scratch / "defective parts", 100, defective=True)
    window = stage.window(str(copy_demo(stage.scratch)))
    calibrator = calibrator_of(window)
    dialog = calibrator.open_dialog()
    dialog.set_folders(str(ok), str(ng))
    dialog.set_split(0.5, 7)
    results: list[str] = []
    calibrator.finished.connect(results.append)
    calibrator.calibrate()
    stage.wait(lambda: bool(results), what="the calibration")
    stage.grab(dialog)


def _remote(stage: Stage, window: Any, server: Any) -> Any:
    """Model ▸ Device ▸ Remote server… filled in for the mock server, Test connection answered."""
    from app.ui import actions

    dialog = actions.remote_controller(window).open_dialog()
    dialog.url.setText(server.grpc_url)
    dialog.model.setText("nuclei")
    dialog.auth.setCurrentIndex(dialog.auth.findData("bearer"))
    dialog.token.setText(TOKEN)
    dialog.remember.setChecked(True)
    dialog.test_button.click()
    stage.wait(lambda: dialog.answer.text().startswith(("ready", "remote")), what="Test connection")
    return dialog


TOKEN = "demo-token"


def _mock_server() -> Any:
    import keyring
    from keyring.backends.null import Keyring

    sys.path.insert(0, str(REPO / "tests"))
    from remote_mocks import MockServer

    keyring.set_keyring(Keyring())  # never the user's keyring
    return MockServer(REPO / "models/nuclei.onnx", name="nuclei", token=TOKEN, device="CPU")


def scene_remote(stage: Stage, subject: str) -> None:
    """The nuclei model on the Open Inference Protocol mock (loopback, a bearer token): the dialog after Test
    connection (`dialog`), the window using it (`window`), or the window after the server stayed busy through a
    picture's retries (`failed`)."""
    with _mock_server() as server:
        window = stage.window("models/nuclei.onnx", ["resources/samples/nuclei/nuclei_01.png"])
        dialog = _remote(stage, window, server)
        if subject == "dialog":
            stage.grab(dialog)
            return
        dialog.ok_button.click()
        stage.wait(lambda: window.summary is not None and window.state.model.info.remote is not None,
                   what="the remote model")
        stage.wait(lambda: "network+queue" in window.status.latency.text(), what="a remote result")
        if subject == "failed":
            failed: list[object] = []
            window.image_failed.connect(lambda *a: failed.append(a))
            server.state.busy = 4  # every try of the next picture: 1 + 3 retries
            window.add_paths([REPO / "resources/samples/nuclei/nuclei_02_dense.png"])
            stage.wait(lambda: bool(failed), what="the failure")
        stage.grab()
        stage.close()


STATION_BAND = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
STATION_ORDER = ("anomaly_clean_01_metal.png", "anomaly_05_pits.png", "anomaly_clean_02_plastic.png",
                 "anomaly_06_stain.png", "anomaly_04_scratch.png", "anomaly_07_mixed.png",
                 "anomaly_08_plastic_mixed.png", "anomaly_clean_03_metal.png")


def _station_file(folder: Path, *, stall_after_s: float | None = None) -> Path:
    import yaml

    (folder / "in").mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {"name": "line-3", "model": str(REPO / "models/surface_anomaly.onnx"),
                              "device": "cpu", "verdict": STATION_BAND, "source": {"watch": "in", "settle_s": 0.2},
                              "out": "out", "sinks": {"log": {}, "folder": {}}}
    if stall_after_s is not None:
        values["stall_after_s"] = stall_after_s
    path = folder / "STATION.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def _drop(stage: Stage, controller: Any, folder: Path, source: Path | bytes, as_name: str) -> None:
    """A part arrives in the watch folder (written aside, then renamed in); waits until the view shows it."""
    partial = folder / f".{as_name}.part"
    if isinstance(source, bytes):
        partial.write_bytes(source)
    else:
        shutil.copyfile(source, partial)
    partial.rename(folder / as_name)
    stage.wait(lambda: controller.view.frame.text().startswith(Path(as_name).stem), what=as_name)


def scene_station(stage: Stage, moment: str) -> None:
    """A station on the anomaly model over a watch folder: parts passing (`running`), an NG with the strip filled
    (`ng`), a stalled source (`stalled`), or an unreadable part's ERROR and then the stall (`error_stalled`)."""
    from app.ui import actions

    window = stage.window("models/surface_anomaly.onnx")
    controller = actions.station_controller(window)
    stall = 3 if moment in ("stalled", "error_stalled") else None
    folder = stage.scratch / "line"
    controller.start(_station_file(folder, stall_after_s=stall))
    stage.wait(lambda: controller.current is not None, what="the station")
    parts = STATION_ORDER if moment in ("running", "ng", "error_stalled") else STATION_ORDER[2:3]
    for index, name in enumerate(parts):
        _drop(stage, controller, folder / "in", REPO / "resources/samples/anomaly" / name, f"part_{index + 1:04d}.png")
    if moment == "ng":
        _drop(stage, controller, folder / "in", REPO / "resources/samples/anomaly/anomaly_05_pits.png",
              "part_0009.png")
    if moment == "error_stalled":
        _drop(stage, controller, folder / "in", b"\x89PNG\r\n\x1a\n not a picture", "part_0009.png")
    if stall is not None:
        stage.wait(lambda: "STALLED" in controller.view.alarm.text(), what="the stall alarm")
    stage.grab()
    controller.stop()
    stage.wait(lambda: not controller.running, what="the station's end")


def _orthanc(stage: Stage) -> Any:
    """A real Orthanc on loopback (tests/io/pacs/orthanc.py) holding two studies of the CT sample's patient: the
    sample series and a second study (a copy with its own UIDs, a later date), and SegLens's settings naming it."""
    import pydicom
    from pydicom.uid import generate_uid

    sys.path.insert(0, str(REPO / "tests"))
    from tests.io.pacs.orthanc import Orthanc

    server = Orthanc.launch(stage.scratch / "orthanc")
    try:
        files = sorted((REPO / "resources/samples/ct").glob("IM*"))
        server.upload(files)
        study, series, later = generate_uid(), generate_uid(), stage.scratch / "later"
        later.mkdir()
        for path in files:
            data = pydicom.dcmread(path)
            data.StudyInstanceUID, data.SeriesInstanceUID = study, series
            data.SOPInstanceUID = data.file_meta.MediaStorageSOPInstanceUID = generate_uid()
            data.StudyDate, data.AccessionNumber = "20260315", "ACC-2026-0315"
            data.StudyDescription, data.SeriesDescription = "CT chest follow-up", "Axial 5 mm"
            data.save_as(later / path.name)
        server.upload(sorted(later.iterdir()))
        settings = Path(os.environ["SEGLENS_SETTINGS"])
        settings.write_text(f"pacs:\n  ORTHANC: {{url: \"dicomweb+{server.dicomweb_url}\", auth: basic, "
                            f"username: {server.user}}}\n", encoding="utf-8")
        os.environ["SEGLENS_PACS_SECRET_ORTHANC"] = server.password
    except BaseException:
        server.stop()  # never left running
        raise
    return server


def scene_pacs(stage: Stage, subject: str) -> None:
    """File ▸ Open from PACS… against a real Orthanc: a search by the patient's ID, then a second search, and the
    second study chosen with its series listed (`search`); or the chosen series retrieved and open through
    ct_demo (`opened`)."""
    import pydicom

    from app.ui.actions import pacs_controller

    server = _orthanc(stage)
    try:
        patient = str(pydicom.dcmread(REPO / "resources/samples/ct/IM0001").PatientID)
        window = stage.window("models/ct_demo.onnx")
        dialog = pacs_controller(window).open_dialog()
        dialog.node.setCurrentText("ORTHANC")
        for query in ("NOBODY", patient):  # a search that finds nothing, then the patient's
            dialog.patient_id.setText(query)
            dialog.search_button.click()
            stage.wait(lambda: dialog.search_button.isEnabled(), what="the search")
            stage.settle(0.5)
        stage.wait(lambda: dialog.studies.rowCount() == 2, what="two studies")
        dialog.studies.selectRow(0)
        stage.wait(lambda: dialog.series.rowCount() > 0, what="the study's series")
        stage.settle(0.5)
        if subject == "search":
            stage.grab(dialog)
            return
        dialog.series.selectRow(0)
        shown: list[object] = []
        window.overlay_shown.connect(shown.append)
        dialog.retrieve_button.click()
        stage.wait(lambda: bool(shown), what="the retrieved series")
        stage.wait(lambda: "counting" not in _legend_text(window) and "mL" in _legend_text(window),
                   what="the whole volume's mL")
        dialog.close()  # the reader closes the dialog once the series is open
        shown.clear()
        window.show_path(window.files.current_path(), 15)  # slice 16 of 32: through the lungs
        stage.wait(lambda: bool(shown), what="slice 16")
        stage.grab()
        stage.close()
    finally:
        server.stop()


SCRATCH_STROKE = ((114, 966), (200, 892), (300, 810), (400, 730), (500, 636), (600, 540), (686, 454))


def scene_instances(stage: Stage, moment: str) -> None:
    """The bundled instance demo (surface_instances) on surface_04: the overlay and the Instances list; a row chosen;
    or corrected — the long scratch, which the model found as four pieces, deleted piece by piece and painted again
    with the brush as one."""
    window = stage.window(str(REPO / "models" / "surface_instances.onnx"),
                          ["resources/samples/surface/surface_04_mixed.jpg"])
    listed = window.panel.instance_list()
    if moment == "chosen":
        listed.click_row(2)  # the second pit
    elif moment == "corrected":
        xs, ys = [x for x, _ in SCRATCH_STROKE], [y for _, y in SCRATCH_STROKE]
        for piece in [i for i in window.instances.shown().items if i.class_name == "scratch"
                      and i.box[0] >= min(xs) - 40 and i.box[2] <= max(xs) + 40 and i.box[1] >= min(ys) - 40]:
            window.instances.delete(piece)
        window.instances.brush_radius = 6
        window.instances.finish_stroke(0, [(float(x), float(y)) for x, y in SCRATCH_STROKE])
        painted = window.instances.shown().items[-1]
        listed.select(painted)  # chosen, as a click on it would (the whole picture stays in view)
        window.viewer.instances_item.set_highlight(painted)
    window.panel.reveal(listed)
    stage.grab()


def scene_review_report(stage: Stage) -> None:
    """tools/review_report_demo.py's report (the surface samples, a few reviews) in headless Chromium."""
    sys.path.insert(0, str(REPO / "tools"))
    from review_report_demo import main as make_report

    report = make_report(stage.scratch / "review_demo")
    browser = shutil.which("chromium-headless-shell") or shutil.which("chromium") or "chromium"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={stage.png}", f"--window-size={stage.shot.screen[0]},{stage.shot.screen[1]}",
                    report.resolve().as_uri()], check=True, capture_output=True, timeout=120)


# ---------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="pictures to make (file names under docs/); default: all")
    parser.add_argument("--check", action="store_true", help="exit 1 naming each stale picture; makes nothing")
    parser.add_argument("--list", action="store_true", help="the pictures, their screens and states")
    parser.add_argument("--stale", action="store_true", help="make only the pictures --check finds stale or missing")
    parser.add_argument("--scene", help=argparse.SUPPRESS)  # inside a scene's process
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--png", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        return check()
    if args.list:
        for shot in SHOTS:
            print(f"{shot.file:36} {shot.screen[0]}x{shot.screen[1]}  {shot.state}")
        return 0
    if args.scene:
        return run_scene(args.scene, args.scratch, args.png)
    unknown = set(args.names) - {shot.file for shot in SHOTS}
    if unknown:
        parser.error(f"no such picture: {', '.join(sorted(unknown))}")
    wanted = set(args.names) | (stale_files() if args.stale else set())
    if args.stale and not wanted:
        print("no picture is stale")
        return 0
    return make(shot for shot in SHOTS if not wanted or shot.file in wanted)


if __name__ == "__main__":
    sys.exit(main())
