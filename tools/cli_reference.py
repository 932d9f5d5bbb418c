"""Write docs/cli-reference.md: every command's `--help`, as the real argparse parsers print it.

The page is made from `app.cli.build_parser()` (every subcommand, and the subcommands of `pacs`) and the viewer's
parser (`app.ui.app.parse_args`), at a fixed help width (COLUMNS=100, no colour), so it does not depend on the
terminal it is made in. `--check` writes nothing: it exits 1 with one line naming the page when the committed one
differs from what the parsers print now (`.ci/run` and tests/house/test_docs.py run it).

    uv run python tools/cli_reference.py [--check]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/generated_page.py, also when loaded by path
from generated_page import write_or_check

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "cli-reference.md"
WIDTH = "100"

HEADER = """# Command-line reference

Every command's `--help`, generated from the real parsers by `tools/cli_reference.py` (do not edit by hand: run
`uv run python tools/cli_reference.py` after changing an option or its help). The guide, with examples, is
[cli.md](cli.md).
"""


def _fixed_width() -> None:
    """argparse asks shutil.get_terminal_size, which reads COLUMNS first; colour off for Python 3.14's help."""
    os.environ["COLUMNS"] = WIDTH
    os.environ["NO_COLOR"] = "1"
    os.environ.pop("FORCE_COLOR", None)
    # `pacs --help` names the settings file: as on any Linux machine, not this one's home or $SEGLENS_SETTINGS
    os.environ.pop("SEGLENS_SETTINGS", None)
    os.environ["XDG_CONFIG_HOME"] = str(Path.home() / ".config")  # shown as ~/.config/SegLens/settings.yaml


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of each subcommand, in the order they were added (aliases left out)."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # argparse keeps its subcommands here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    found.append((name, sub))
    return found


def _sections(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    """The parser's help under a heading, then each subcommand's, one level down."""
    out = [f"{'#' * level} `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, sub in _subparsers(parser):
        out += _sections(sub, f"{title} {name}", min(level + 1, 4))
    return out


def _viewer_help() -> str:
    """The viewer's parser lives inside app.ui.app.parse_args: its --help, caught."""
    from app.ui.app import parse_args

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        parse_args(["--help"])
    return text.getvalue().rstrip()


def render() -> str:
    _fixed_width()
    from app.cli import build_parser

    lines = [HEADER, "## `seglens` (the viewer)", "", "```text", _viewer_help(), "```", ""]
    lines += _sections(build_parser(), "seglens-cli", 2)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/cli-reference.md from the real argparse parsers.")
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed page is stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    text = render()
    return write_or_check(PAGE, text, repo=REPO, check=args.check, tool="cli_reference.py")


if __name__ == "__main__":
    sys.exit(main())
