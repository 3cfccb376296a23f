"""An offline fit's passes as typed records: :class:`PassMetrics`, a line of fit_offline.py's
RUN/metrics.jsonl (and a dict of its checkpoint's history), with its :class:`Validation` searches.

``to_json`` writes the keys in the order fit_offline.py writes them, leaving out the ranking loss
where the fit had none; ``from_json`` reads them back, so a line read and written again is the same
text.  Without torch: the documentation's tables (``experiments.summary``) and the plot read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Validation:
    """A* with a pass's weights on one validation set at one value scale."""

    #: The sum of the searches' best costs (to 4 decimals).
    total_cost: float
    #: How many searches reached the best known cost.
    hits: int

    def to_json(self) -> dict[str, Any]:
        return {"total_cost": self.total_cost, "hits": self.hits}


@dataclass(frozen=True)
class PassMetrics:
    """One pass of the fit: a line of RUN/metrics.jsonl (a checkpoint's history has their dicts)."""

    #: 1-based.
    epoch: int
    #: Mean training loss of the pass, and the loss on the expressions held out.
    loss: float
    held_out_loss: float
    #: Samples fitted.
    samples: int
    #: With --rank-weight: the mean ranking loss and the sibling groups it was over.
    rank_loss: float | None
    groups: int | None
    #: By "SET SCALE" (e.g. "validation 0.2"), as fit_offline.py's ``validate`` gives them.
    validation: dict[str, Validation]
    #: Wall-clock seconds of the pass (to 0.1).
    seconds: float

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epoch": self.epoch,
            "loss": self.loss,
            "held_out_loss": self.held_out_loss,
            "samples": self.samples,
        }
        if self.rank_loss is not None:
            out |= {"rank_loss": self.rank_loss, "groups": self.groups}
        out["validation"] = {name: v.to_json() for name, v in self.validation.items()}
        out["seconds"] = self.seconds
        return out

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> PassMetrics:
        return cls(
            epoch=row["epoch"],
            loss=row["loss"],
            held_out_loss=row["held_out_loss"],
            samples=row["samples"],
            rank_loss=row.get("rank_loss"),
            groups=row.get("groups"),
            validation={name: Validation(**v) for name, v in row["validation"].items()},
            seconds=row["seconds"],
        )
