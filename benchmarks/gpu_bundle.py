"""Carry what the GPU check needs to the lent GPU machine, which reaches no package registry.

That machine (docs/PERFORMANCE.md, "GPU") has Python 3.12, PyTorch's CUDA 13 + cuDNN 9 wheels, numpy, OpenCV,
Pillow, PyYAML, onnx and nvidia-ml-py, but only the CPU build of onnxruntime and no pydicom, platformdirs or
PySide6. Each command sent there takes the working tree plus named ignored paths, 64 MiB in all, so the
244 MiB onnxruntime-gpu wheel travels in parts, one per command, sent back to back while the machine is warm.

    prepare   (here)   wheels pinned by uv.lock → .gpu/payload parts + manifest.json; prints the calls to send
    receive K (there)  checks part K against the manifest and moves it to a staging folder outside the tree
    assemble  (there)  joins and verifies the parts, installs into a scratch site that shadows the CPU
                       onnxruntime, and prints the environment lines (`export PYTHONPATH=…`) for the check

Standard library only (plus `packaging` for lock markers, here): it runs on that machine before anything else
is installed. PySide6 travels trimmed to QtCore (the viewer's worker is a QObject on a QThread and needs no
GUI module): the whole wheel is 80 MB, QtCore with its ICU libraries about 14 MB compressed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = Path(os.environ.get("SEGLENS_GPU_BUNDLE", ROOT / ".gpu"))  # git-ignored: wheels, parts, manifest
CALL_LIMIT = 64 * 2**20  # what one device call may carry: the working tree plus the carried paths
MARGIN = 3 * 2**20  # for files added to the tree between `prepare` and the calls (the manifest, edits)
INSTALLED = ("onnxruntime-gpu", "pydicom", "platformdirs", "shiboken6")  # pip install --no-index --no-deps
QT = "pyside6-essentials"  # trimmed to QtCore
# The QtCore part of a PySide6-Essentials wheel: the package's Python files, QtCore, libpyside and ICU.
QT_KEEP = re.compile(r"PySide6/(?:[^/]+\.py|support/.*|QtCore\.abi3\.so|libpyside6\.abi3\.so[.\d]*"
                     r"|Qt/lib/(?:libQt6Core\.so[.\d]*|libicu\w+\.so[.\d]*))$|[^/]+\.dist-info/(?!RECORD$).*")
# System libraries libQt6Core needs that a bare image may lack; used there only when its own are missing.
QT_SYSTEM_LIBS = ("libglib-2.0.so.0", "libgthread-2.0.so.0", "libpcre2-8.so.0")
STAGE = Path(os.environ.get("SEGLENS_GPU_STAGE", "/tmp/seglens-gpu"))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- prepare (development machine) ---------------------------------------------------------------------------

@dataclass(frozen=True)
class LockedWheel:
    name: str
    version: str
    filename: str
    sha256: str | None  # None when taken from --offline-wheels (then the manifest's own hash is the check)


def wheel_tags(filename: str) -> tuple[str, str, str]:
    """('cp312', 'cp312', 'manylinux_2_28_x86_64') from a wheel's file name."""
    parts = filename[:-4].split("-")
    return parts[-3], parts[-2], parts[-1]


def wheel_fits(filename: str, python: tuple[int, int], glibc: tuple[int, int] = (2, 35)) -> bool:
    """Installable on CPython `python` on x86_64 Linux with `glibc` (the GPU machine: 3.12, Ubuntu 24.04)."""
    py_tags, abi, platforms = wheel_tags(filename)
    cp = f"cp{python[0]}{python[1]}"
    py_ok = any(t in (cp, "py3", f"py{python[0]}{python[1]}") or (abi == "abi3" and t.startswith("cp3")
                and int(t[3:]) <= python[1]) for t in py_tags.split("."))
    abi_ok = abi in (cp, "abi3", "none")
    return py_ok and abi_ok and any(_platform_ok(p, glibc) for p in platforms.split("."))


def _platform_ok(tag: str, glibc: tuple[int, int]) -> bool:
    if tag == "any":
        return True
    legacy = {"manylinux1_x86_64": (2, 5), "manylinux2010_x86_64": (2, 12), "manylinux2014_x86_64": (2, 17)}
    if tag in legacy:
        return legacy[tag] <= glibc
    found = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
    return bool(found) and (int(found.group(1)), int(found.group(2))) <= glibc


def locked_wheels(lock: Path, python: tuple[int, int]) -> dict[str, LockedWheel]:
    """The wheel uv.lock pins for each bundled package, for CPython `python` on x86_64 Linux."""
    import tomllib
    from packaging.markers import Marker

    env = {"python_full_version": f"{python[0]}.{python[1]}.0", "python_version": f"{python[0]}.{python[1]}",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    chosen: dict[str, LockedWheel] = {}
    for package in tomllib.loads(lock.read_text())["package"]:
        name = package["name"]
        markers = package.get("resolution-markers")
        if name not in (*INSTALLED, QT) or (markers and not any(Marker(m).evaluate(env) for m in markers)):
            continue
        fitting = [w for w in package.get("wheels", []) if wheel_fits(w["url"].rsplit("/", 1)[1], python)]
        if not fitting:
            raise SystemExit(f"uv.lock: no {name} {package['version']} wheel for CPython {python[0]}.{python[1]}")
        best = max(fitting, key=lambda w: wheel_tags(w["url"].rsplit("/", 1)[1])[1] != "none")  # binary first
        chosen[name] = LockedWheel(name, package["version"], best["url"].rsplit("/", 1)[1],
                                   best["hash"].removeprefix("sha256:"))
    missing = sorted({*INSTALLED, QT} - set(chosen))
    if missing:
        raise SystemExit(f"uv.lock pins no {', '.join(missing)} for CPython {python[0]}.{python[1]}")
    return chosen


def fetch_wheel(wheel: LockedWheel, cache: Path, python: tuple[int, int]) -> Path:
    """The locked wheel in `cache`, downloaded with pip unless already there; its sha256 checked against the lock."""
    path = cache / wheel.filename
    if not (path.exists() and sha256(path) == wheel.sha256):
        _, _, platforms = wheel_tags(wheel.filename)
        platform_args = [arg for tag in platforms.split(".") if tag != "any" for arg in ("--platform", tag)]
        say(f"downloading {wheel.filename}")
        _run([*_pip(), "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--python-version", f"{python[0]}.{python[1]}", "--implementation", "cp",
                        *platform_args, "-d", str(cache), f"{wheel.name}=={wheel.version}"])
    if not path.exists():
        raise SystemExit(f"pip did not fetch {wheel.filename} (the file uv.lock pins)")
    if sha256(path) != wheel.sha256:
        raise SystemExit(f"{path}: sha256 differs from uv.lock's — a damaged or different download")
    return path


def _pip() -> list[str]:
    """pip, from this Python if it has it; a uv-made venv has none (and its python3 comes first on PATH under
    `uv run`), so then from the interpreter the venv was made from — the same version, so the same wheel tags."""
    import importlib.util

    has_pip = importlib.util.find_spec("pip") is not None
    return [sys.executable if has_pip else getattr(sys, "_base_executable", sys.executable), "-m", "pip"]


def _run(command: list[str]) -> None:
    try:
        subprocess.run(command, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"{' '.join(command[:4])} … failed: {exc}") from None


def trimmed_qt(wheel: Path, into: Path, system_libs: tuple[str, ...] = QT_SYSTEM_LIBS) -> Path:
    """PySide6's QtCore (and the dist-info) from a PySide6-Essentials wheel, as a .tar.xz to unpack into a site;
    plus copies of this machine's glib libraries under `fallback-libs/`, used there only if its own are missing."""
    target = into / f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}-qtcore.tar.xz"
    with zipfile.ZipFile(wheel) as source, tarfile.open(target, "w:xz", preset=6) as archive:
        for member in source.infolist():
            if member.is_dir() or not QT_KEEP.fullmatch(member.filename):
                continue
            data = source.read(member)
            info = tarfile.TarInfo(member.filename)
            info.size, info.mode = len(data), (member.external_attr >> 16) & 0o777 or 0o644
            archive.addfile(info, io.BytesIO(data))
        for name in system_libs:
            found = _system_library(name)
            if found:
                archive.add(found, arcname=f"fallback-libs/{name}")
    return target


def _system_library(name: str) -> Path | None:
    try:
        listing = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found = re.search(rf"\s{re.escape(name)} \(libc6,x86-64\) => (\S+)", listing)
    return Path(found.group(1)).resolve() if found else None


def tree_bytes(root: Path = ROOT) -> int:
    """What every device call carries anyway: tracked files and untracked files git does not ignore."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / os.fsdecode(name)).stat().st_size for name in listed
               if name and (root / os.fsdecode(name)).is_file())


def part_size(payload: int, tree: int) -> int:
    """Equal parts, as few as fit beside the tree in one call (with a margin for the manifest and later edits)."""
    room = CALL_LIMIT - tree - MARGIN
    if room < 2**20:
        raise SystemExit(f"the working tree ({tree / 2**20:.1f} MiB) leaves no room for parts in a device call")
    count = -(-payload // room)
    return -(-payload // count)


def split_payload(payload: Path, folder: Path, part_bytes: int) -> list[dict]:
    parts = []
    with open(payload, "rb") as source:
        for index in range(1, 1000):
            data = source.read(part_bytes)
            if not data:
                break
            path = folder / f"part-{index:02d}"
            path.write_bytes(data)
            parts.append({"name": path.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return parts


def prepare(*, lock: Path, bundle: Path, python: tuple[int, int], offline: Path | None, part_bytes: int | None,
            tree: int | None = None) -> dict:
    """Wheels → payload.tar → parts + manifest.json in `bundle`. Returns the manifest."""
    cache = offline or bundle / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    wanted = locked_wheels(lock, python)
    files = {}
    for name, wheel in wanted.items():
        files[name] = (cache / wheel.filename) if offline else fetch_wheel(wheel, cache, python)
        if not files[name].exists():
            raise SystemExit(f"{files[name]}: missing (--offline-wheels must hold the wheels uv.lock pins)")
    for old in bundle.glob("part-*"):
        old.unlink()
    with tempfile.TemporaryDirectory(dir=bundle) as scratch:
        members = [files[name] for name in INSTALLED] + [trimmed_qt(files[QT], Path(scratch))]
        payload = Path(scratch) / "payload.tar"
        with tarfile.open(payload, "w", format=tarfile.PAX_FORMAT) as archive:
            for member in members:
                archive.add(member, arcname=member.name)
        tree = tree_bytes() if tree is None else tree
        size = part_bytes or part_size(payload.stat().st_size, tree)
        manifest = {
            "python": f"{python[0]}.{python[1]}", "tree_bytes": tree, "part_bytes": size,
            "payload": {"bytes": payload.stat().st_size, "sha256": sha256(payload)},
            "members": [{"name": m.name, "sha256": sha256(m), "locked_sha256": _locked_hash(m, wanted),
                         "install": "pip" if m.suffix == ".whl" else "unpack"} for m in members],
            "parts": split_payload(payload, bundle, size),
        }
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def _locked_hash(member: Path, wanted: dict[str, LockedWheel]) -> str | None:
    """uv.lock's hash for a wheel that is the locked file; None for the trimmed Qt and for --offline-wheels
    files that differ from it (said so), whose manifest hash is then their only check."""
    locked = next((w.sha256 for w in wanted.values() if w.filename == member.name), None)
    if locked and sha256(member) != locked:
        say(f"note: {member.name} is not the file uv.lock pins (another build of it): checked by its own hash")
        return None
    return locked


RECEIVE_TIMEOUT_S = 20  # a receive only keeps its part (seconds); the tree's growth adds calls, so each stays short


def calls(manifest: dict, *, bundle_rel: str = ".gpu", check_timeout: int = 360) -> list[dict]:
    """The device calls, in order: one per part; the last one carries the last part and runs the check. Their
    limits together stay well under the session's 15 minutes, leaving time to run the check again."""
    parts = manifest["parts"]
    out = []
    for index, part in enumerate(parts, 1):
        last = index == len(parts)
        command = ("bash benchmarks/gpu_check.sh" if last else f"bash benchmarks/gpu_check.sh --receive {index}")
        out.append({"command": command, "carry": [f"{bundle_rel}/manifest.json", f"{bundle_rel}/{part['name']}"],
                    "timeout_s": check_timeout if last else RECEIVE_TIMEOUT_S})
    return out


def carried_bytes(manifest: dict, call: dict, bundle: Path) -> int:
    """What one call carries: the tree as measured at prepare time plus its carried files."""
    return manifest["tree_bytes"] + sum((bundle.parent / rel).stat().st_size for rel in call["carry"])


# --- receive / assemble (the GPU machine) --------------------------------------------------------------------

def receive(index: int, *, bundle: Path, stage: Path) -> str:
    manifest = json.loads((bundle / "manifest.json").read_text())
    part = manifest["parts"][index - 1]
    source = bundle / part["name"]
    if not source.exists():
        raise SystemExit(f"part {index}: {source} did not arrive (was it named in carry?)")
    if sha256(source) != part["sha256"]:
        raise SystemExit(f"part {index}: {source} is damaged (sha256 differs from the manifest): send it again")
    stage.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), stage / part["name"])
    return f"part {index}/{len(manifest['parts'])} ok ({part['bytes'] / 2**20:.1f} MiB) → {stage}"


def _find_part(part: dict, bundle: Path, stage: Path) -> Path:
    for folder in (stage, bundle):
        candidate = folder / part["name"]
        if candidate.exists() and candidate.stat().st_size == part["bytes"]:
            return candidate
    raise SystemExit(f"{part['name']} is missing: send its call again (the machine may have been replaced)")


def assemble(*, bundle: Path, stage: Path, site: Path) -> dict[str, str]:
    """Parts → verified payload → a scratch site; returns the environment the check must run with."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if manifest["python"] != running:
        say(f"the carried bundle is for Python {manifest['python']}, this is {running}: not installed")
        return {}
    marker = site / ".seglens-bundle"
    if not (marker.exists() and marker.read_text() == manifest["payload"]["sha256"]):
        _install(manifest, bundle, stage, site)
        marker.write_text(manifest["payload"]["sha256"])
    else:
        say(f"bundle already installed in {site}")
    _link_nvidia_wheels(site)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}
    missing = [name for name in QT_SYSTEM_LIBS if not _system_library(name)]
    if missing and (site / "fallback-libs").is_dir():
        say(f"using the bundled {', '.join(missing)} (not on this machine)")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(site / "fallback-libs"),
                                                               os.environ.get("LD_LIBRARY_PATH", "")]))
    return env


def _install(manifest: dict, bundle: Path, stage: Path, site: Path) -> None:
    payload = stage / "payload.tar"
    digest = hashlib.sha256()
    with open(payload, "wb") as out:
        for part in manifest["parts"]:
            with open(_find_part(part, bundle, stage), "rb") as source:
                for block in iter(lambda s=source: s.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != manifest["payload"]["sha256"]:
        raise SystemExit("the joined parts differ from the payload prepared (sha256): run prepare and send again")
    unpacked = stage / "payload"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(payload) as archive:
        archive.extractall(unpacked, filter="data")
    payload.unlink()
    for member in manifest["members"]:
        path = unpacked / member["name"]
        locked = member["locked_sha256"]
        if sha256(path) != member["sha256"] or (locked and member["sha256"] != locked):
            raise SystemExit(f"{member['name']}: sha256 differs from the manifest or uv.lock")
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    wheels = [str(unpacked / m["name"]) for m in manifest["members"] if m["install"] == "pip"]
    say(f"installing {len(wheels)} wheels into {site}")
    _run([*_pip(), "install", "--quiet", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
          "--disable-pip-version-check", "--target", str(site), *wheels])
    for member in manifest["members"]:
        if member["install"] == "unpack":
            with tarfile.open(unpacked / member["name"]) as archive:
                archive.extractall(site, filter="data")


def _link_nvidia_wheels(site: Path) -> None:
    """onnxruntime.preload_dlls() looks for NVIDIA's CUDA/cuDNN wheels beside the onnxruntime package (`..`);
    there they live in PyTorch's site-packages, so the scratch site gets a link to that `nvidia` folder."""
    link = site / "nvidia"
    if link.exists():
        return
    for folder in map(Path, sys.path):
        if folder != site and (folder / "nvidia").is_dir() and not str(folder).startswith(str(site)):
            link.symlink_to(folder / "nvidia", target_is_directory=True)
            say(f"linked {link} → {folder / 'nvidia'}")
            return
    say("no NVIDIA CUDA/cuDNN wheels found beside this Python: preload_dlls will rely on the system's libraries")


# --- command line ------------------------------------------------------------------------------------------

def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="download the wheels uv.lock pins, split them into parts, print the calls")
    prep.add_argument("--python", type=_version, default=(3, 12), help="the GPU machine's Python (default 3.12)")
    prep.add_argument("--offline-wheels", type=Path, help="take the wheels from this folder; download nothing")
    prep.add_argument("--part-mib", type=int, help="part size (default: what a call leaves beside the tree)")
    prep.add_argument("--bundle", type=Path, default=BUNDLE)
    rec = sub.add_parser("receive", help="(GPU machine) check part K and move it to the staging folder")
    rec.add_argument("index", type=int)
    rec.add_argument("--bundle", type=Path, default=BUNDLE)
    asm = sub.add_parser("assemble", help="(GPU machine) join, verify and install; print `export` lines")
    asm.add_argument("--bundle", type=Path, default=BUNDLE)
    asm.add_argument("--site", type=Path, default=STAGE / "site")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        args.bundle.mkdir(parents=True, exist_ok=True)
        manifest = prepare(lock=ROOT / "uv.lock", bundle=args.bundle, python=args.python,
                           offline=args.offline_wheels, part_bytes=args.part_mib and args.part_mib * 2**20)
        _print_calls(manifest, args.bundle)
    elif args.command == "receive":
        print(receive(args.index, bundle=args.bundle, stage=STAGE))
    else:
        for key, value in assemble(bundle=args.bundle, stage=STAGE, site=args.site).items():
            print(f"export {key}={_quote(value)}")
    return 0


def _print_calls(manifest: dict, bundle: Path) -> None:
    sequence = calls(manifest, bundle_rel=os.path.relpath(bundle, ROOT))
    total = manifest["payload"]["bytes"] / 2**20
    print(f"payload {total:.1f} MiB in {len(sequence)} parts of ≤ {manifest['part_bytes'] / 2**20:.0f} MiB "
          f"(tree {manifest['tree_bytes'] / 2**20:.1f} MiB). Send these device calls back to back "
          f"(the machine keeps the parts only while it stays warm, ~30 s after each call), then give_back:")
    for number, call in enumerate(sequence, 1):
        print(f"  {number}. run {json.dumps(call, ensure_ascii=False)}"
              f"   # {carried_bytes(manifest, call, bundle) / 2**20:.1f} MiB")


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(main())
