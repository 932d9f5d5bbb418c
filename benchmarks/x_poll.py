"""When a process's first window becomes visible, as another X client sees it: polls the X server (Xlib through
ctypes, no extra package) for a viewable window whose _NET_WM_PID is the process's, then for its first painted
pixel, the way a user's eye or a test harness would see it — not the time the process says it called show().

    with XPoller() as x:
        proc = subprocess.Popen(...)
        seen = x.wait_visible(proc.pid, timeout=30)   # Seen(mapped=time.time(), painted=time.time()), or None

"painted": the window's pixel at (4, 4) — menu bar or window background, never black in Qt's default palette —
is no longer black, which is what a window shows on Xvfb's black root before its first paint.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from dataclasses import dataclass

IS_VIEWABLE = 2
XA_CARDINAL = 6
Z_PIXMAP = 2
ALL_PLANES = 0xFFFFFFFF
PROBE = (4, 4)


@dataclass(frozen=True)
class Seen:
    mapped: float  # time.time() of the first poll that saw the window viewable
    painted: float | None  # ... and its probe pixel painted (None: not within the timeout)


class _WindowAttributes(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("border_width", ctypes.c_int), ("depth", ctypes.c_int), ("visual", ctypes.c_void_p),
                ("root", ctypes.c_ulong), ("class_", ctypes.c_int), ("bit_gravity", ctypes.c_int),
                ("win_gravity", ctypes.c_int), ("backing_store", ctypes.c_int), ("backing_planes", ctypes.c_ulong),
                ("backing_pixel", ctypes.c_ulong), ("save_under", ctypes.c_int), ("colormap", ctypes.c_ulong),
                ("map_installed", ctypes.c_int), ("map_state", ctypes.c_int), ("all_event_masks", ctypes.c_long),
                ("your_event_mask", ctypes.c_long), ("do_not_propagate_mask", ctypes.c_long),
                ("override_redirect", ctypes.c_int), ("screen", ctypes.c_void_p)]


def available() -> bool:
    """An X display to poll (DISPLAY set, libX11 loadable, the display opens)."""
    if not os.environ.get("DISPLAY") or not ctypes.util.find_library("X11"):
        return False
    try:
        with XPoller():
            return True
    except OSError:
        return False


class XPoller:
    """One connection to $DISPLAY; `wait_visible(pid)` polls every `interval` s (1 ms: a poll costs ~0.1 ms)."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self._x = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
        x = self._x
        x.XOpenDisplay.restype = ctypes.c_void_p
        x.XOpenDisplay.argtypes = [ctypes.c_char_p]
        x.XDefaultRootWindow.restype = ctypes.c_ulong
        x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        x.XInternAtom.restype = ctypes.c_ulong
        x.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        x.XQueryTree.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
                                 ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.POINTER(ctypes.c_ulong)),
                                 ctypes.POINTER(ctypes.c_uint)]
        x.XGetWindowAttributes.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(_WindowAttributes)]
        x.XGetWindowProperty.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long,
                                         ctypes.c_long, ctypes.c_int, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
                                         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_ulong),
                                         ctypes.POINTER(ctypes.c_ulong),
                                         ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte))]
        x.XGetImage.restype = ctypes.c_void_p
        x.XGetImage.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_uint,
                                ctypes.c_uint, ctypes.c_ulong, ctypes.c_int]
        x.XGetPixel.restype = ctypes.c_ulong
        x.XGetPixel.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        x.XDestroyImage.argtypes = [ctypes.c_void_p]
        x.XFree.argtypes = [ctypes.c_void_p]
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        # a window that vanishes between XQueryTree and the next request is a BadWindow: ignore it, don't exit
        self._on_error = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(lambda _d, _e: 0)
        x.XSetErrorHandler(self._on_error)
        self._display = x.XOpenDisplay(None)
        if not self._display:
            raise OSError(f"cannot open X display {os.environ.get('DISPLAY')!r}")
        self._root = x.XDefaultRootWindow(self._display)
        self._pid_atom = x.XInternAtom(self._display, b"_NET_WM_PID", 0)

    def __enter__(self) -> XPoller:
        return self

    def __exit__(self, *_exc) -> None:
        if self._display:
            self._x.XCloseDisplay(self._display)
            self._display = None

    def wait_visible(self, pid: int, *, timeout: float = 60.0, alive=lambda: True) -> Seen | None:
        """When a window of `pid` was first seen mapped, and painted (None: not mapped before the timeout or
        before `alive()` turned false)."""
        deadline = time.monotonic() + timeout
        window = None
        while window is None:
            if time.monotonic() > deadline or not alive():
                return None
            window = self._find(self._root, pid, depth=0)
            if window is None:
                time.sleep(self.interval)
        mapped = time.time()
        while time.monotonic() < deadline and alive():
            if self._painted(window):
                return Seen(mapped, time.time())
            time.sleep(self.interval)
        return Seen(mapped, None)

    def _painted(self, window: int) -> bool:
        image = self._x.XGetImage(self._display, window, *PROBE, 1, 1, ALL_PLANES, Z_PIXMAP)
        if not image:
            return False
        try:
            return self._x.XGetPixel(image, 0, 0) != 0
        finally:
            self._x.XDestroyImage(image)

    def _children(self, window: int) -> list[int]:
        root, parent = ctypes.c_ulong(), ctypes.c_ulong()
        children, count = ctypes.POINTER(ctypes.c_ulong)(), ctypes.c_uint()
        if not self._x.XQueryTree(self._display, window, ctypes.byref(root), ctypes.byref(parent),
                                  ctypes.byref(children), ctypes.byref(count)):
            return []
        found = [children[i] for i in range(count.value)]
        if children:
            self._x.XFree(children)
        return found

    def _find(self, window: int, pid: int, *, depth: int) -> int | None:
        """A viewable window of `pid`: top-level windows are the root's children, or with a reparenting window
        manager its frames' children."""
        for child in self._children(window):
            if self._pid(child) == pid and self._viewable(child):
                return child
            found = self._find(child, pid, depth=depth + 1) if depth < 2 else None
            if found is not None:
                return found
        return None

    def _viewable(self, window: int) -> bool:
        attributes = _WindowAttributes()
        return bool(self._x.XGetWindowAttributes(self._display, window, ctypes.byref(attributes))) and \
            attributes.map_state == IS_VIEWABLE

    def _pid(self, window: int) -> int | None:
        kind, fmt = ctypes.c_ulong(), ctypes.c_int()
        count, after = ctypes.c_ulong(), ctypes.c_ulong()
        data = ctypes.POINTER(ctypes.c_ubyte)()
        status = self._x.XGetWindowProperty(self._display, window, self._pid_atom, 0, 1, 0, XA_CARDINAL,
                                            ctypes.byref(kind), ctypes.byref(fmt), ctypes.byref(count),
                                            ctypes.byref(after), ctypes.byref(data))
        try:
            if status != 0 or count.value < 1 or fmt.value != 32:
                return None
            return ctypes.cast(data, ctypes.POINTER(ctypes.c_ulong))[0]  # format 32 is a C long per item
        finally:
            if data:
                self._x.XFree(data)
