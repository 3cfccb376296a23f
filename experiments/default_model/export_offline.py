"""Write one pass of a fit_offline.py run as a model file, with the config and data it was fitted to.

Run:  python experiments/default_model/export_offline.py RUN --epoch N --scale S OUT
                                                         [--config configs/default_offline.yaml] [--force]

The model file holds the pass's weights, ``--config`` (what the model is and was fitted on, with
search.value_scale set to ``--scale``, the scale chosen on validation) and RUN/provenance.json (the
data files' searches and the weights the run started from), so that ``--model`` finds its search
settings and a reader finds how it was made.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from app.models import value_scale
from experiments.default_model.fit_offline import PROVENANCE
from gnn.model_file import save_model_file
from knossos.cli import whole_number
from knossos.errors import KsError
from training.checkpoint import export_model, load_checkpoint
from training.config import load_config
from training.trainer import weights_path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--epoch", type=whole_number(), required=True)
    ap.add_argument("--scale", type=value_scale, required=True)
    ap.add_argument("--config", default=str(ROOT / "configs" / "default_offline.yaml"))
    ap.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = ap.parse_args(argv)
    source = weights_path(args.run, args.epoch)
    if not source.is_file():
        raise SystemExit(f"export_offline.py: error: no weights {source}")
    if args.out.exists() and not args.force:
        raise SystemExit(f"export_offline.py: error: {args.out} exists (--force replaces it)")
    if not (args.run / PROVENANCE).is_file():
        raise SystemExit(f"export_offline.py: error: no {args.run / PROVENANCE} (not a fit_offline.py run)")
    try:
        config = load_config(args.config, [f"search.value_scale={args.scale}"])
    except KsError as err:
        raise SystemExit(err.render("export_offline.py")) from None
    state = load_checkpoint(source)
    state["config"] = config.to_dict()
    state["offline"] = json.loads((args.run / PROVENANCE).read_text())
    state["averaged"] = [str(source)]
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "model.pt"
        save_model_file(staged, state)
        export_model(staged, args.out, args.scale)
    print(f"wrote {args.out}: {source}, value scale {args.scale:g}")


if __name__ == "__main__":
    main()
