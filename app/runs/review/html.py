"""File ▸ Export review report: one self-contained HTML file that opens in any browser with no network.

Everything is inline: the CSS, and the overlays as `data:` thumbnails (320 px on the long side, JPEG: a folder of
hundreds of images stays a file that mails and opens quickly). There is no script, font or URL to fetch; the
state filter is CSS-only (radio buttons). Every piece of user data (file names, notes, user names, class and
metric names) is HTML-escaped. A review made with another model than the one named in the header is not shown.
The header says what made the results (model and sidecar with their hashes, thresholds, provider: the run's
app.runs.outputs.provenance.RunIdentity); long names wrap inside their column instead of pushing the others off the
page.
"""

from __future__ import annotations

import base64
import getpass
import html
import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from app.errors import shown
from app.io.files import atomic_write
from app.runs.review.log import STATE_NAMES, STATES, Review

if TYPE_CHECKING:
    from app.runs.outputs.provenance import RunIdentity
    from app.runs.privacy.check import Identifying
    from app.runs.privacy.words import OwnWords

THUMBNAIL_SIDE = 320  # px, the long side of an embedded overlay
_JPEG_QUALITY = 82
_SHORT_SHA = 12


@dataclass(frozen=True)
class ReportItem:
    rel: str
    overlay_png: bytes | None  # an overlay image (PNG bytes) or None
    verdict: str = ""  # "ok"/"review"/"ng"/""
    verdict_reason: str = ""
    metrics: dict[str, float] | None = None  # e.g. {"iou": .8, "dice": .9}
    review: Review | None = None
    figures: tuple[tuple[str, str], ...] = ()  # a volume's (name, value) lines: slices, the slice shown, mL
    identifying: Identifying | None = None  # --anonymize: what the finished page must not hold (its input's values)


def write_review_report(path: Path, items: list[ReportItem], *, model_name: str, model_sha256: str,
                        seglens_version: str, title: str = "SegLens review", run: RunIdentity | None = None,
                        inputs: str | None = None, own: OwnWords | None = None) -> Path:
    """Write the report for `items` (in their order) to `path` atomically and return `path`. `run`: what made the
    results, for the header; `inputs`: the input folder as the reader should see it (relative), if at all; `own`:
    the model's words (app.runs.privacy.words.own_words of its classes), not searched for names under --anonymize
    where the page wrote them (its title, model, sidecar, a figure's name: a class "lung" of a patient Lung)."""
    model = model_sha256.lower()
    reviews = [_own_review(item.review, model) for item in items]
    page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title data-own>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        _header(title, model_name, model, seglens_version, run, inputs),
        _totals(items, reviews),
        _filter_bar(),
        _table(items, reviews),
        "</body></html>",
        "",
    ])
    _last_check(path, page, items, reviews, _own(own, title, model_name, run))
    atomic_write(Path(path), page.encode("utf-8"))
    return Path(path)


def _own(own: OwnWords | None, title: str, model_name: str, run: RunIdentity | None) -> OwnWords:
    """The words the page writes from the model: `own` (else SegLens's own only), its title, model and sidecar."""
    from app.runs.privacy.words import own_words

    return (own or own_words()).also(title, model_name, *((run.model, run.sidecar or "") if run is not None else ()))


def _last_check(path: Path, page: str, items: list[ReportItem], reviews: list[Review | None],
                own: OwnWords) -> None:
    """--anonymize: the finished page searched for every input's identifying values (app.runs.privacy.check, as
    the last check of a run's files), before anything is written; one found refuses the report in one line naming
    its kind, never the value. Left out of the search: the words of input names (see below), the CSS, markup and
    embedded pictures (app.runs.privacy.check.page_text) and the reviewers' user names (staff, not
    patients: a login "jdoe" is not patient DOE)."""
    held = [item.identifying for item in items if item.identifying is not None]
    if not held:
        return
    from app.errors import OutputError
    from app.runs.privacy.check import Identifying, page_text, with_article, without

    # what a reader sees: not the CSS (Otto in "bottom"), markup or pictures, nor what the page marks data-own
    # where it is the model's words (a figure "mL lung" of a patient Lung)
    searched = page_text(page, own)
    for staff in {_user(), *(review.who for review in reviews if review is not None)} - {""}:
        searched = without(searched, html.unescape(_e(staff)))  # as a word: a login "Pat" leaves "Patrick"
    # the words of input names are not searched for here (a file "lung_01.png" and the class "lung"): the rows
    # name inputs by pseudonyms by construction, and a note holding such a word was withheld (app.runs.review.items)
    texts = tuple(text for one in held for text in one.texts if text[0] != "input name")
    identifying = Identifying(texts, frozenset().union(*(one.uids for one in held)))
    kind = identifying.in_text(searched) or ("source UID" if any(u in searched for u in identifying.uids) else None)
    if kind:
        raise OutputError(f"{path}: the review report is not written: {with_article(kind)} of an input is still "
                          "in it (the last check of --anonymize)")


def _own_review(review: Review | None, model: str) -> Review | None:
    """A review made with another model is never shown as this one's (no SHA: the caller vouches for it)."""
    if review is None or (review.model_sha256 and review.model_sha256.lower() != model):
        return None
    return review


def _e(text: object) -> str:
    # shown: a file name's non-UTF-8 bytes as \xNN (they made the page's UTF-8 encoding fail), control characters
    # spelt out (HTML has no place for them)
    return html.escape(shown(text), quote=True)


def _header(title: str, model_name: str, model: str, version: str, run: RunIdentity | None,
            inputs: str | None) -> str:
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    facts = [("Model", f"<span data-own>{_e(model_name)}</span> {_hash(model)}"), *_run_facts(run),
             *([("Inputs", f'<span class="path">{_breakable(inputs)}</span>')] if inputs else []),
             ("SegLens", _e(version)), ("Generated", f"{generated} UTC"), ("By", _e(_user() or "unknown"))]
    items = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in facts)
    return f"<header><h1 data-own>{_e(title)}</h1><dl>{items}</dl></header>"


def _hash(sha256: str) -> str:
    return f'<code title="{_e(sha256)}">sha256 {_e(sha256[:_SHORT_SHA])}</code>'


def _run_facts(run: RunIdentity | None) -> list[tuple[str, str]]:
    """Sidecar, thresholds, verdict rules, settings and provider of the run (app.runs.outputs.provenance)."""
    if run is None:
        return []
    sidecar = f"<span data-own>{_e(run.sidecar)}</span> {_hash(run.sidecar_sha256)}" \
        if run.sidecar and run.sidecar_sha256 else "none"
    thresholds = ", ".join(f"{_e(name)} {value:g}" for name, value in run.thresholds.items()) or "the model's own"
    facts = [("Sidecar", sidecar), ("Thresholds", thresholds)]
    if run.verdict_rules or run.review_rules:
        facts.append(("Verdict", "; ".join([*(f"fail if {_e(rule)}" for rule in run.verdict_rules),
                                            *(f"review if {_e(rule)}" for rule in run.review_rules)])))
    if run.settings_sha256:
        facts.append(("Settings", _hash(run.settings_sha256)))
    if run.provider:
        fallback = f" ({_e(run.fallback_reason)})" if run.fallback_reason else ""
        facts.append(("Provider", f"{_e(run.provider)}{fallback}"))
    return facts


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no USER and no passwd entry: "who" is best-effort
        return ""


def _totals(items: list[ReportItem], reviews: list[Review | None]) -> str:
    states = Counter(review.state if review else "unreviewed" for review in reviews)
    verdicts = Counter(item.verdict.lower() for item in items)
    cells = [("images", len(items), "total")]
    cells += [(STATE_NAMES[state], states[state], f"s-{state}") for state in STATES[1:] + STATES[:1]]
    cells += [("OK", verdicts["ok"], "v-ok"), *([("REVIEW", verdicts["review"], "v-review")] if verdicts["review"]
                                                 else []), ("NG", verdicts["ng"], "v-ng")]
    boxes = "".join(f'<div class="count {kind}"><b>{count}</b><span>{name}</span></div>'
                    for name, count, kind in cells)
    return f'<section class="totals" aria-label="Totals">{boxes}</section>'


def _filter_bar() -> str:
    choices = [("all", "All")] + [(state, STATE_NAMES[state].capitalize()) for state in STATES]
    inputs = "".join(f'<input type="radio" name="f" id="f-{key}"{" checked" if key == "all" else ""}>'
                     for key, _label in choices)
    labels = "".join(f'<label for="f-{key}">{label}</label>' for key, label in choices)
    return f'{inputs}<nav class="filter" aria-label="Show">Show {labels}</nav>'


def _table(items: list[ReportItem], reviews: list[Review | None]) -> str:
    head = "".join(f"<th>{name}</th>" for name in ("Overlay", "File", "Review of the result", "Note", "Who / when",
                                                    "Verdict", "Metrics"))
    rows = "".join(_row(item, review) for item, review in zip(items, reviews, strict=True))
    empty = '<tr><td colspan="7" class="none">No images.</td></tr>' if not items else ""
    return f"<table class=\"items\"><thead><tr>{head}</tr></thead><tbody>{rows}{empty}</tbody></table>"


def _row(item: ReportItem, review: Review | None) -> str:
    state = review.state if review else "unreviewed"
    when = review.when.replace("T", " ") if review else ""  # 2026-12-01 02:28:53Z: readable, and one line
    who = f"{_e(review.who or '—')}<br><small>{_e(when)}</small>" if review else "—"
    cells = (_thumbnail(item.overlay_png), f'<td class="file">{_breakable(item.rel)}</td>',
             f'<td><span class="pill s-{state}">{STATE_NAMES.get(state, state)}</span></td>',
             f'<td class="note">{_e(review.note) if review and review.note else ""}</td>',
             f'<td class="who">{who}</td>', _verdict(item), _metrics(item.metrics, item.figures))
    return f'<tr class="s-{state}">{"".join(cells)}</tr>'


def _breakable(rel: str) -> str:
    """The escaped file name with line-break chances after separators: a long path wraps at `/`, `_`, `-`."""
    text = _e(rel)
    for separator in ("/", "_", "-", "."):
        text = text.replace(separator, separator + "<wbr>")
    return text


def _thumbnail(png: bytes | None) -> str:
    jpeg = _thumbnail_jpeg(png) if png else None
    if jpeg is None:
        return f'<td class="thumb"><div class="missing">{"no overlay" if not png else "unreadable overlay"}</div></td>'
    data = base64.b64encode(jpeg).decode("ascii")
    return f'<td class="thumb"><img alt="overlay" src="data:image/jpeg;base64,{data}"></td>'


def _thumbnail_jpeg(png: bytes) -> bytes | None:
    """The overlay scaled down to THUMBNAIL_SIDE on its long side (never up), as JPEG bytes; None if undecodable."""
    image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        return None
    scale = THUMBNAIL_SIDE / max(image.shape[:2])
    if scale < 1:
        size = (max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale)))
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    ok, buffer = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, _JPEG_QUALITY])
    return buffer.tobytes() if ok else None


def _verdict(item: ReportItem) -> str:
    verdict = item.verdict.lower()
    pill = f'<span class="pill v-{verdict}">{verdict.upper()}</span>' if verdict in _VERDICTS else _e(verdict)
    reason = f"<br><small>{_e(item.verdict_reason)}</small>" if item.verdict_reason else ""
    return f'<td class="verdict">{pill or "—"}{reason}</td>'


def _metrics(metrics: dict[str, float] | None, figures: tuple[tuple[str, str], ...] = ()) -> str:
    if not metrics and not figures:
        return "<td>—</td>"
    lines = "".join(f"<tr><th data-own>{_e(name)}</th><td>{_e(value)}</td></tr>" for name, value in figures)
    lines += "".join(f"<tr><th>{_e(name)}</th><td>{_number(value)}</td></tr>"
                     for name, value in (metrics or {}).items())
    return f'<td><table class="metrics">{lines}</table></td>'


def _number(value: Any) -> str:  # a number, or anything else (shown as text)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return _e(value)
    if math.isnan(number):
        return "—"
    return f"{number:.0f}" if number.is_integer() and abs(number) < 1e15 else f"{number:.3f}"


_PILL_COLORS = {"unreviewed": ("#e4e7eb", "#3e4650"), "accepted": ("#d3f2dc", "#116329"),
                "rejected": ("#fbd9d6", "#a1261b"), "corrected": ("#fdebc8", "#8a4b00"),
                "ok": ("#d3f2dc", "#116329"), "review": ("#fdebc8", "#8a4b00"), "ng": ("#fbd9d6", "#a1261b")}
_VERDICTS = ("ok", "review", "ng")  # the report's verdict cells (app.inference.decide.verdict.Verdict.cell)
_FILTERS = "".join(f"#f-{state}:checked~table.items>tbody>tr:not(.s-{state}){{display:none}}" for state in STATES)
_CSS = (
    "*{box-sizing:border-box}"
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#1f2328;"
    "background:#f6f8fa}"
    "header{display:flex;flex-wrap:wrap;align-items:baseline;gap:8px 32px;margin-bottom:16px}"
    "h1{font-size:22px;margin:0}"
    "dl{display:flex;flex-wrap:wrap;gap:4px 24px;margin:0}dl div{display:flex;gap:6px;min-width:0}"
    "dt{color:#59636e;white-space:nowrap}dd{margin:0;min-width:0;overflow-wrap:anywhere}"
    "code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#eaeef2;padding:1px 5px;border-radius:4px}"
    ".totals{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:14px}"
    ".count{background:#fff;border:1px solid #d1d9e0;border-radius:8px;padding:8px 14px;min-width:96px;"
    "border-top:4px solid #8c959f}.count b{display:block;font-size:22px}.count span{color:#59636e}"
    + "".join(f".count.{kind}{{border-top-color:{fg}}}" for kind, (_bg, fg) in
              (("s-" + state, _PILL_COLORS[state]) for state in STATES)) +
    "".join(f".count.v-{key}{{border-top-color:{_PILL_COLORS[key][1]}}}" for key in _VERDICTS) +
    "input[name=f]{position:absolute;opacity:0}"
    ".filter{margin-bottom:10px;color:#59636e}.filter label{display:inline-block;margin-left:6px;padding:3px 10px;"
    "border:1px solid #d1d9e0;border-radius:14px;background:#fff;cursor:pointer;color:#1f2328}"
    + "".join(f"#f-{key}:checked~.filter label[for=f-{key}]{{background:#1f2328;color:#fff}}"
              for key in ("all", *STATES)) + _FILTERS +
    "table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d1d9e0}"
    "th,td{text-align:left;vertical-align:top;padding:8px 10px;border-bottom:1px solid #e6eaef}"
    "thead th{background:#eef1f4;font-weight:600;position:sticky;top:0}"
    ".thumb{width:336px}.thumb img{display:block;max-width:320px;max-height:320px;border-radius:4px}"
    ".missing{width:320px;height:120px;display:flex;align-items:center;justify-content:center;color:#8c959f;"
    "background:#eef1f4;border-radius:4px}"
    # anywhere, not break-word: only `anywhere` lets a long unbroken name shrink its column's minimum width, so a
    # deep path wraps in its cell instead of pushing the other columns off the page
    ".file,.path{overflow-wrap:anywhere;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}"
    ".verdict small{overflow-wrap:anywhere}"
    ".file{min-width:18ch}.verdict{min-width:110px}.who small{white-space:nowrap}"
    ".note{white-space:pre-wrap;min-width:160px;overflow-wrap:anywhere}.who small,td small{color:#59636e}"
    ".pill{display:inline-block;white-space:nowrap;overflow-wrap:normal;padding:1px 10px;border-radius:10px;"
    "font-weight:600;font-size:12px}"
    + "".join(f".pill.{prefix}{key}{{background:{bg};color:{fg}}}" for key, (bg, fg) in _PILL_COLORS.items()
              for prefix in (("v-",) if key in _VERDICTS else ("s-",))) +
    ".metrics{border:0;width:auto;min-width:140px}"
    ".metrics th,.metrics td{border:0;padding:0 8px 0 0;font-weight:400;background:none}"
    ".metrics th{color:#59636e;white-space:nowrap}.metrics td{text-align:right}.none{color:#8c959f;text-align:center}"
    "@media print{body{background:#fff;margin:0}.filter,input{display:none}thead th{position:static}"
    "tr{break-inside:avoid}}"
)
