"""Progress of long work: a tqdm bar on a terminal, one log line per unit otherwise.

A workflow job writes to a log file, where a bar is noise (or nothing: tqdm turns itself
off without a terminal); there each finished unit (an epoch, an image set, a corruption)
becomes one ``logging`` line instead, so a 24-minute training job is not silent.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["Progress"]


class Progress:
    """A tqdm bar on a terminal; elsewhere, :meth:`log` lines.

    Parameters
    ----------
    total : int
        Steps of the bar.
    desc : str
        What runs (the bar's label and the log lines' prefix).
    enabled : bool, default=True
        False: neither bar nor lines.
    unit : str, default="it"
        The bar's unit.
    logger : logging.Logger, optional
        Where the lines go (default: ``dgpbench.progress``).
    """

    def __init__(
        self,
        total: int,
        desc: str,
        enabled: bool = True,
        unit: str = "it",
        logger: logging.Logger | None = None,
    ) -> None:
        from tqdm.auto import tqdm

        # disable=None: tqdm shows the bar only when its stream is a terminal
        self.bar = tqdm(
            total=total, desc=desc, unit=unit, leave=False, disable=None if enabled else True
        )
        self.desc = desc
        self.lines = enabled and bool(self.bar.disable)
        self.logger = logger or logging.getLogger(__name__)

    def update(self, n: int = 1) -> None:
        """Advance the bar by ``n`` steps."""
        self.bar.update(n)

    def set_postfix(self, **values: Any) -> None:
        """Values shown after the bar."""
        self.bar.set_postfix(refresh=False, **values)

    def log(self, message: str, *args: Any) -> None:
        """One line ``"<desc>: <message>"`` when no bar is shown (``logging`` %-style args)."""
        if self.lines:
            self.logger.info(f"{self.desc}: {message}", *args)

    def close(self) -> None:
        """Remove the bar."""
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
