"""seglens-cli models: the bundled models, listed from their specs alone."""

from __future__ import annotations

import argparse
import json

from app.cli.options import EXIT_OK
from app.cli.options import shown as _shown


def cmd_models(args: argparse.Namespace) -> int:
    """The bundled models from their specs alone (no ONNX Runtime session): fast."""
    from app.inference.describe.bundled import bundled_models, bundled_prompt_sidecars, bundled_summary, prompt_summary
    from app.paths import models_dir

    rows = [bundled_summary(path) for path in bundled_models()]
    if args.json:  # the image models only: each a MODEL for run, info, bench (a prompt pair is none)
        print(json.dumps([row.as_dict() for row in rows], indent=2, ensure_ascii=False))
        return EXIT_OK
    prompts = [prompt_summary(path) for path in bundled_prompt_sidecars()]
    print(_shown(f"{len(rows)} bundled models in {models_dir()} (use a name wherever MODEL is asked):"))
    width = max((len(row.name) for row in rows + prompts), default=0)
    for row in rows:
        print(_shown(row.line(name_width=width)))
    if prompts:
        print(_shown(f"{len(prompts)} bundled prompt model{'s' if len(prompts) != 1 else ''} (an encoder and a "
                     "decoder: `seglens-cli prompt NAME …`, the viewer's Smart tool):"))
        for row in prompts:
            print(_shown(row.line(name_width=width)))
    return EXIT_OK
