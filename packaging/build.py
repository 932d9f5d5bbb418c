"""Build the frozen SegLens folder for one flavor, from a clean environment of its own.

    python packaging/build.py --flavor cpu      # onnxruntime (CPU build): no CUDA provider, smallest
    python packaging/build.py --flavor cuda13   # onnxruntime-gpu (current line) + NVIDIA CUDA 13 / cuDNN 9 wheels
    python packaging/build.py --flavor cuda12   # onnxruntime-gpu 1.26.x + CUDA 12 wheels (drivers older than R580)

Output: dist/SegLens/ with SegLens (windowed) and seglens-cli (console), or --dist DIR. Each flavor gets its own
environment in build/env-<flavor> because `onnxruntime` and `onnxruntime-gpu` cannot live in one. Versions come
from uv.lock (uv export), so a build is reproducible. Works the same on Windows (run it with the Python you use).
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYINSTALLER = "pyinstaller==6.22.3"
WORKSTATION = ("pacs", "remote", "station", "opcua")  # pyproject.toml's workstation extra: what every flavor ships
CUDA12_PACKAGES = ["onnxruntime-gpu==1.26.0", "nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "nvidia-cufft-cu12",
                   "nvidia-curand-cu12", "nvidia-cudnn-cu12>=9,<10"]


def run(command: list[str], **kwargs) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def requirements(flavor: str, without: tuple[str, ...] = ()) -> list[str]:
    """Pinned runtime requirements from uv.lock, with the onnxruntime package of the flavor: the core and the
    workstation extra, less the extras named in `without` (to measure what each costs)."""
    extras = ["workstation"] if not without else [name for name in WORKSTATION if name not in without]
    extras += ["cuda"] if flavor == "cuda13" else []
    extra = [flag for name in extras for flag in ("--extra", name)]
    exported = subprocess.run(["uv", "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project",
                               "--no-header", "--no-annotate", *extra], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout
    lines = [line.strip() for line in exported.splitlines() if line.strip() and not line.startswith("#")]
    lines = [line for line in lines if "python_full_version < '3.11'" not in line]
    if flavor == "cpu":
        gpu = next(line for line in lines if line.startswith("onnxruntime-gpu=="))
        version = gpu.split("==")[1].split(";")[0].strip()
        lines = [line for line in lines if not _is_gpu_runtime(line)]
        lines.append(f"onnxruntime=={version}")
    elif flavor == "cuda12":
        lines = [line for line in lines if not _is_gpu_runtime(line)]
        lines += CUDA12_PACKAGES
    return lines


def _is_gpu_runtime(requirement: str) -> bool:
    """onnxruntime-gpu and NVIDIA's CUDA wheels (not nvidia-ml-py, which reads GPU memory on any flavor)."""
    return requirement.startswith(("onnxruntime-gpu==", "nvidia-")) and not requirement.startswith("nvidia-ml-py")


def environment(flavor: str, without: tuple[str, ...] = ()) -> Path:
    name = flavor + "".join(f"-without-{extra}" for extra in without)
    env = ROOT / "build" / f"env-{name}"
    python = env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        run(["uv", "venv", "--python", sys.executable, str(env)])
    reqs = ROOT / "build" / f"requirements-{name}.txt"
    reqs.write_text("\n".join(requirements(flavor, without)) + "\n")
    run(["uv", "pip", "install", "--python", str(python), "-r", str(reqs), PYINSTALLER])
    return python


MIME_TYPES = ("image/png", "image/jpeg", "image/tiff", "application/dicom")


def _desktop_exec_arg(path: Path) -> str:
    """One Exec= argument, quoted as the Desktop Entry spec asks when it holds a reserved character."""
    text = str(path)
    if not any(c in text for c in ' \t\n"\'\\><~|&;$*?#()`'):
        return text
    escaped = "".join("\\" + c if c in '"`$\\' else c for c in text)
    return f'"{escaped}"'.replace("\\", "\\\\")  # then the string-value escape of the whole key


def desktop_entry(folder: Path) -> str:
    """The freedesktop.org .desktop entry for the SegLens folder at `folder` (absolute Exec= and Icon= paths)."""
    folder = Path(folder).absolute()
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.5",
        "Name=SegLens",
        "GenericName=Image model viewer",
        "Comment=Run segmentation and detection models on images and view the results over them",
        f"TryExec={folder / 'SegLens'}",
        f"Exec={_desktop_exec_arg(folder / 'SegLens')} %F",
        f"Icon={folder / 'seglens.png'}",
        "Terminal=false",
        "Categories=Graphics;Science;MedicalSoftware;",
        f"MimeType={';'.join(MIME_TYPES)};",
        "StartupWMClass=SegLens",
        "StartupNotify=true",
        "",
    ])


def add_desktop_files(target: Path) -> None:
    """Beside the executables: the icon, and the desktop integration of the platform (Linux: seglens.desktop for
    the folder where it was built and install-desktop-entry.sh, which rewrites it for wherever the folder is
    unpacked; Windows: windows_shortcut.ps1, a per-user Start-menu shortcut)."""
    resources = ROOT / "resources"
    if os.name == "nt":
        shutil.copy2(resources / "seglens.ico", target / "seglens.ico")
        shutil.copy2(ROOT / "packaging" / "windows_shortcut.ps1", target / "windows_shortcut.ps1")
        return
    shutil.copy2(resources / "seglens.png", target / "seglens.png")
    (target / "seglens.desktop").write_text(desktop_entry(target), encoding="utf-8")
    script = target / "install-desktop-entry.sh"
    shutil.copy2(ROOT / "packaging" / "install_desktop_entry.sh", script)
    script.chmod(0o755)


def strip_debug_info(target: Path) -> str:
    """Strip the debugging sections and the static symbol tables of the libraries that ship them (Linux, with
    binutils' strip and readelf): `--strip-unneeded` keeps every symbol a program links against or a library loads
    by name (the dynamic symbol table), and takes the DWARF data and the .symtab only a debugger reads. Some wheels
    ship them: ml_dtypes' extension is 24 MB with them and 1.5 MB without; cryptography's 2.7 MB of symbols. A
    library the loader would refuse after it (strip misplaces the segments of some that patchelf rewrote: numpy's
    OpenBLAS) gets `--strip-debug` instead, or stays as it was."""
    if not sys.platform.startswith("linux") or not (shutil.which("strip") and shutil.which("readelf")):
        return "debug info: not stripped (needs Linux and binutils' strip and readelf)"
    count = saved = 0
    for path in sorted(target.rglob("*")):
        if path.is_symlink() or not path.is_file() or not (path.name.endswith(".so") or ".so." in path.name):
            continue
        sections = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=False)
        if ".debug_info" not in sections.stdout and " .symtab " not in sections.stdout:
            continue
        original = path.read_bytes()
        if _stripped(path, "--strip-unneeded", original) or _stripped(path, "--strip-debug", original):
            count, saved = count + 1, saved + len(original) - path.stat().st_size
    return f"debug info and symbol tables stripped from {count} libraries: {saved / 2**20:.1f} MB less"


def _stripped(path: Path, how: str, original: bytes) -> bool:
    """`strip how path`, kept only when the loader still accepts the result (else `original` is put back)."""
    subprocess.run(["strip", how, str(path)], check=True)
    if segments_aligned(path.read_bytes()):
        return True
    path.write_bytes(original)
    return False


def segments_aligned(elf: bytes) -> bool:
    """Whether each loadable segment of a 64-bit little-endian ELF file starts at a file offset congruent to its
    address modulo its alignment, as the dynamic loader requires ("ELF load command address/offset not
    page-aligned"); True for any other file."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return True
    table, = struct.unpack_from("<Q", elf, 0x20)
    size, count = struct.unpack_from("<HH", elf, 0x36)
    for index in range(count):
        kind, _flags, offset, address, _physical, _filed, _memory, align = struct.unpack_from(
            "<IIQQQQQQ", elf, table + index * size)
        if kind == 1 and align > 1 and offset % align != address % align:  # PT_LOAD
            return False
    return True


def folder_report(dist: Path) -> str:
    files = [p for p in dist.rglob("*") if p.is_file() and not p.is_symlink()]
    total = sum(p.stat().st_size for p in files)
    largest = sorted(files, key=lambda p: p.stat().st_size, reverse=True)[:8]
    lines = [f"{dist}: {total / 2**20:.0f} MB in {len(files)} files; largest:"]
    lines += [f"  {p.stat().st_size / 2**20:7.1f} MB  {p.relative_to(dist)}" for p in largest]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flavor", choices=["cpu", "cuda13", "cuda12"], default="cpu")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output parent folder (default dist/)")
    parser.add_argument("--without", action="append", default=[], choices=WORKSTATION,
                        help="leave this extra of the workstation set out (to measure what it costs; repeatable)")
    args = parser.parse_args()
    started = time.perf_counter()
    python = environment(args.flavor, tuple(args.without))
    env_s = time.perf_counter() - started
    target = args.dist / "SegLens"
    if target.exists():
        shutil.rmtree(target)
    run([str(python), "-m", "PyInstaller", str(ROOT / "packaging" / "seglens.spec"), "--noconfirm", "--clean",
         "--distpath", str(args.dist), "--workpath", str(ROOT / "build" / f"pyinstaller-{args.flavor}")],
        env={**os.environ, "SEGLENS_FLAVOR": args.flavor})  # the same spec: a hidden import left out is a warning
    print(strip_debug_info(target))
    add_desktop_files(target)
    total_s = time.perf_counter() - started
    print(folder_report(target))
    print(f"flavor {args.flavor}: environment {env_s:.0f} s, total {total_s:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
