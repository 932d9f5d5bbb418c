"""`seglens-cli run` under random file names (bytes that are not UTF-8, control characters, `..`, formula
starts, long names): it always ends with 0 or 1, writes only inside --out, replaces no input, and its report has
one row per input (hypothesis; kept small: each example is a whole run)."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from app.cli import main

_PNG = io.BytesIO()
Image.fromarray(np.full((12, 16, 3), 200, np.uint8)).save(_PNG, format="PNG")

# name bytes: anything a POSIX file name may hold (no "/" or NUL), weighted towards the audit's troublemakers
_PIECES = st.one_of(
    st.binary(min_size=1, max_size=12).map(lambda b: b.replace(b"/", b"_").replace(b"\0", b"_")),
    st.sampled_from([b"..", b".", b"\xe9", b"\x1b[2J", b"=HYPERLINK(", b"\n", b"\r", b"-", b"@", b"x" * 200]),
)
_NAMES = st.lists(st.lists(_PIECES, min_size=1, max_size=4).map(b"".join), min_size=1, max_size=5, unique=True)


def _safe(name: bytes) -> bytes:
    name = name[:240] or b"_"
    return b"_" + name if name in (b".", b"..") else name


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=_NAMES, suffixes=st.lists(st.sampled_from([b".png", b".PNG", b"", b".jpg"]), min_size=5, max_size=5))
def test_run_survives_any_file_names(models, names, suffixes):
    model = models("rgb_classes")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        inputs = root / "in"
        inputs.mkdir()
        files = {}
        for name, suffix in zip(names, suffixes, strict=False):
            path = os.path.join(os.fsencode(inputs), _safe(name) + suffix)
            files[path] = True
            with open(path, "wb") as handle:
                handle.write(_PNG.getvalue())
        out = root / "out"
        errors = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(errors):
            code = main(["run", str(model), *[os.fsdecode(p) for p in files], "--out", str(out)])
        assert code in (0, 1), errors.getvalue()  # a valid model and --out: no name may stop the whole run
        written = {p for p in root.rglob("*") if p.is_file()}
        outside = {p for p in written if out not in p.parents and inputs not in p.parents}
        assert not outside, outside
        assert {os.fsencode(p) for p in inputs.iterdir()} == set(files)  # no input replaced, nothing added
        with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == len(files)


_KEYS = ["input", "output", "classes", "postprocess", "runtime", "name", "task", "size", "resize", "threshold",
         "activation", "min_area", "top_k", "mean", "std", "scale", "color", "tile", "window", "range"]
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20), st.sampled_from(_KEYS))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)),
                       max_leaves=25)
_ALIASES = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=6), aliases=st.booleans(),
       depth=st.integers(min_value=0, max_value=200))
def test_run_survives_any_sidecar(models, tmp_path_factory, document, aliases, depth):
    import yaml

    model = models("rgb_classes")
    root = tmp_path_factory.mktemp("fuzz")
    Image.fromarray(np.full((12, 16, 3), 200, np.uint8)).save(root / "a.png")
    text = yaml.safe_dump(document) + (_ALIASES if aliases else "") + "deep: " + "[" * depth + "]" * depth + "\n"
    (root / "side.yaml").write_text(text)
    errors = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(errors):
        code = main(["run", str(model), str(root / "a.png"), "--out", str(root / "out"), "--config",
                     str(root / "side.yaml")])
    assert code in (0, 1, 2)
    lines = errors.getvalue().strip().splitlines()
    if code == 2:  # refused in one line that names the sidecar, never a traceback
        assert lines[-1].startswith("error: ") and "unexpected" not in lines[-1], errors.getvalue()
    else:
        with open(root / "out" / "seglens_report.csv", newline="", encoding="utf-8") as handle:
            assert len(list(csv.DictReader(handle))) == 1
