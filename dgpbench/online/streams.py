"""Clean and shifted streams drawn from a features file, and what a detector does on them.

The ``stream`` workflow target measures, for one model and feature method:

* under no shift, the run time of ``n_streams`` clean streams per ERT
  (:func:`dgpbench.online.run_times`), whose mean should be the ERT;
* under each shift, the detection delay of ``n_shift_streams`` shifted streams
  (:func:`dgpbench.online.detection_delay`).

The clean test features are split (seeded) into the reference rows, on which the
detector is fitted and its thresholds configured, and the held-out rows; with
``reference_splits`` above 1 several times, each split with detectors of its own. A clean
stream draws held-out rows at random, each uniformly among the rows not among the last
``window_size - 1`` drawn (:class:`WindowDraw`), so that no window holds the same row
twice; a shifted stream draws ``change_point`` held-out rows, then, from the change on, the
corrupted twins of held-out images (never the twin of a reference image). Each stream
draws its rows afresh from a seeded generator, so the streams are independent given the
reference; the reference splits are the independent units of the ERT, which the thresholds
hold on average over references (split ``k`` draws the same images for every model).

Why not plain draws with replacement: the detectors' thresholds are simulated on windows
of distinct rows (a permutation of the reference), as windows of a continuous population
are. A window holding one row twice looks different from the reference (for the MMD, an
off-diagonal kernel value of 1), and with a small held-out pool that is common: 20 draws
from 289 rows repeat a row in about half of the windows, and the MMD detector's measured
run time fell about 20% short of the ERT on such streams (docs/online.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numba import njit

from dgpbench.online.evaluation import _stream_run_times, detection_delay
from dgpbench.online.registry import ONLINE_DETECTORS

__all__ = [
    "WindowDraw",
    "clean_run_times",
    "shift_delays",
    "split_reference",
    "stream_records",
]


def split_reference(n_rows: int, n_ref: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the reference and of the held-out rows, drawn without replacement.

    Parameters
    ----------
    n_rows : int
        Rows of the clean features.
    n_ref : int
        Reference rows; at least 1 row must be left over.
    seed : int
        Seed of the split.

    Returns
    -------
    ref, held : ndarray of int
        Disjoint, together all rows.

    Raises
    ------
    ValueError
        If ``n_ref`` is not in ``[1, n_rows - 1]``.

    Examples
    --------
    >>> ref, held = split_reference(10, 6, seed=0)
    >>> len(ref), len(held), len(set(ref) | set(held))
    (6, 4, 10)
    """
    if not 1 <= n_ref < n_rows:
        raise ValueError(
            f"n_ref must be at least 1 and leave held-out rows: got n_ref={n_ref} for "
            f"{n_rows} clean rows"
        )
    order = np.random.default_rng(seed).permutation(n_rows)
    return np.sort(order[:n_ref]), np.sort(order[n_ref:])


class WindowDraw:
    """Row indices of a stream: each uniform among the rows not drawn in the last ``W - 1``.

    Every run of ``window_size`` consecutive indices is then distinct, as the rows of the
    windows the thresholds were simulated on are; with ``window_size = 1``, plain draws
    with replacement.

    Parameters
    ----------
    n_rows : int
        Rows of the pool (at least ``window_size``).
    window_size : int
        The detector's window.
    rng : numpy.random.Generator
        Seeded generator of the draws.

    Raises
    ------
    ValueError
        If the pool has fewer rows than the window.

    Examples
    --------
    >>> draw = WindowDraw(3, 3, np.random.default_rng(0))
    >>> idx = draw.take(9)
    >>> all(len(set(idx[i : i + 3])) == 3 for i in range(7))
    True
    """

    def __init__(self, n_rows: int, window_size: int, rng: np.random.Generator) -> None:
        if window_size < 1 or n_rows < window_size:
            raise ValueError(
                f"a pool of {n_rows} rows cannot fill a window of {window_size} distinct rows: "
                "hold out more rows (a smaller n_ref) or use a smaller window"
            )
        self.n_rows, self.rng = int(n_rows), rng
        # The last W - 1 rows drawn, in a ring (order is irrelevant to the exclusion).
        self._recent = np.empty(int(window_size) - 1, dtype=np.int64)
        self._head = self._count = 0
        self._candidates = np.empty(0, dtype=np.int64)
        self._next = 0

    def restart(self) -> WindowDraw:
        """Start a new stream (no row is excluded at its first draw).

        Returns
        -------
        self : WindowDraw
        """
        self._head = self._count = 0
        return self

    def __call__(self) -> int:
        """The next row index.

        Returns
        -------
        int
        """
        return int(self.take(1)[0])

    def _mark(self) -> tuple[Any, ...]:
        """The draw state now, for :meth:`_rewind` (the candidates are replaced, not edited)."""
        return (self.rng.bit_generator.state, self._candidates, self._next,
                self._recent.copy(), self._head, self._count)  # fmt: skip

    def _rewind(self, mark: tuple[Any, ...]) -> None:
        """Back to the state of :meth:`_mark`: the next draws repeat those made since."""
        state, self._candidates, self._next, recent, self._head, self._count = mark
        self.rng.bit_generator.state = state
        self._recent[:] = recent

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` row indices of the stream.

        Parameters
        ----------
        n : int
            Number of indices.

        Returns
        -------
        ndarray of int, shape (n,)
        """
        out = np.empty(int(n), dtype=np.int64)
        k = 0
        while k < len(out):
            if self._next == len(self._candidates):  # uniform candidates, drawn in blocks
                self._candidates = self.rng.integers(self.n_rows, size=256)
                self._next = 0
            self._next, self._head, self._count, k = _accept_candidates(
                self._candidates, self._next, self._recent, self._head, self._count, out, k
            )
        return out


@njit(cache=True, nogil=True)
def _accept_candidates(candidates, nxt, recent, head, count, out, k):  # pragma: no cover
    """Fill ``out[k:]`` with the candidates from ``nxt`` on that are not recent rows.

    A row is recent if among the ``count`` entries of the ring ``recent``; each accepted
    row enters it at ``head``. Stops when ``out`` or the candidates run out; returns the
    new ``nxt``, ``head``, ``count`` and ``k``.
    """
    lag = recent.shape[0]
    while k < out.shape[0] and nxt < candidates.shape[0]:
        i = candidates[nxt]
        nxt += 1
        seen = False
        for j in range(count):
            if recent[j] == i:
                seen = True
                break
        if seen:
            continue
        out[k] = i
        k += 1
        if lag:
            recent[head] = i
            head = (head + 1) % lag
            count = min(count + 1, lag)
    return nxt, head, count, k


def _window_of(detector: Any, window_size: int | None) -> int:
    return int(detector.window_size if window_size is None else window_size)


def clean_run_times(
    detector: Any,
    pool: np.ndarray,
    n_streams: int,
    max_steps: int,
    seed: int,
    *,
    window_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run times of clean streams of ``pool``'s rows, no row twice in a window.

    Parameters
    ----------
    detector : OnlineMMDDetector or OnlineCVMDetector
        Fitted on rows outside ``pool``.
    pool : ndarray of shape (n_pool, n_features)
        Held-out clean rows.
    n_streams : int
        Streams to run.
    max_steps : int
        Steps after which a stream without an alarm is stopped (censored).
    seed : int
        Seed of the draws (one generator, the streams one after the other).
    window_size : int or None, default=None
        No row is drawn twice within this many consecutive steps (:class:`WindowDraw`);
        None: the detector's ``window_size``.

    Returns
    -------
    times : ndarray of int, shape (n_streams,)
    censored : ndarray of bool, shape (n_streams,)
        As :func:`dgpbench.online.run_times` returns them.

    Raises
    ------
    ValueError
        If ``pool`` has fewer rows than the window.

    Notes
    -----
    A stream's rows are fed in blocks through the detector's ``run`` (one compiled loop);
    the rows drawn past an alarm are given back to the generator, so the run times, and
    the rows of every stream, are those of one ``update`` per drawn row.
    """
    draw = WindowDraw(len(pool), _window_of(detector, window_size), np.random.default_rng(seed))
    return _stream_run_times(detector, _PoolRows(pool, draw), n_streams, max_steps)


class _PoolRows:
    """The rows of ``pool`` that a :class:`WindowDraw` picks, each stream from a restart.

    Rows given back are undrawn (the generator rewound): the next stream starts from the
    generator state of one ``update`` per drawn row.
    """

    def __init__(self, pool: np.ndarray, draw: WindowDraw) -> None:
        self.pool, self.draw = pool, draw
        self._mark: tuple[Any, ...] = ()
        self._n = 0

    def start(self) -> None:
        self.draw.restart()

    def take(self, n: int) -> np.ndarray:
        self._mark, self._n = self.draw._mark(), n
        return self.pool[self.draw.take(n)]

    def give_back(self, k: int) -> None:
        self.draw._rewind(self._mark)
        self.draw.take(self._n - k)


def shift_delays(
    detector: Any,
    clean_pool: np.ndarray,
    shifted_pool: np.ndarray,
    change_point: int,
    n_streams: int,
    max_after: int,
    seed: int,
    *,
    window_size: int | None = None,
) -> np.ndarray:
    """Detection delays of streams that switch from clean to shifted rows at a change point.

    Parameters
    ----------
    detector : OnlineMMDDetector or OnlineCVMDetector
        A fitted detector.
    clean_pool, shifted_pool : ndarray of shape (n_pool, n_features)
        Rows drawn before and after the change (:class:`WindowDraw`: no row twice in a
        window).
    change_point : int
        Clean rows before the change (0: shifted from the first row).
    n_streams : int
        Streams to run.
    max_after : int
        Shifted rows fed at most; a stream without an alarm by then is a miss.
    seed : int
        Seed of the draws (one generator, the streams one after the other).
    window_size : int or None, default=None
        No row is drawn twice within this many consecutive steps; None: the detector's
        ``window_size``.

    Returns
    -------
    ndarray of float, shape (n_streams,)
        :func:`dgpbench.online.detection_delay` per stream: 1 or more is a delay, 0 or
        less a false alarm before the change, NaN a miss.

    Raises
    ------
    ValueError
        If a pool holds fewer rows than the window.
    """
    w = _window_of(detector, window_size)
    rng = np.random.default_rng(seed)
    before, after = WindowDraw(len(clean_pool), w, rng), WindowDraw(len(shifted_pool), w, rng)
    delays = np.empty(n_streams)
    for k in range(n_streams):
        clean = clean_pool[before.restart().take(change_point)]
        shifted = shifted_pool[after.restart().take(max_after)]
        delay = detection_delay(detector, clean, shifted)
        delays[k] = np.nan if delay is None else delay
    return delays


def stream_records(
    features: Mapping[str, np.ndarray],
    *,
    detectors: Sequence[str],
    erts: Sequence[int],
    shifts: Sequence[str],
    n_ref: int,
    window_size: int,
    n_streams: int,
    n_shift_streams: int,
    change_point: int | None = None,
    max_factor: float = 10.0,
    n_bootstraps: int | None = None,
    bootstraps_per_ert: float | None = None,
    cvm_calibration: str = "reference",
    reference_splits: int = 1,
    seed: int = 0,
) -> pd.DataFrame:
    """One record per stream: clean run times and shifted delays, per detector and ERT.

    Parameters
    ----------
    features : mapping of str to ndarray
        ``clean`` (the clean test features) and the shifted features by key (the twins of
        the clean rows, row for row, as ``dgpbench features`` writes them).
    detectors : sequence of str
        Names of :data:`dgpbench.online.ONLINE_DETECTORS`.
    erts : sequence of int
        Expected run times to configure.
    shifts : sequence of str
        Keys of ``features`` to run shifted streams on.
    n_ref : int
        Reference rows (the rest are held out).
    window_size : int
        The detectors' window.
    n_streams : int
        Clean streams per detector and ERT.
    n_shift_streams : int
        Shifted streams per detector, ERT and shift.
    change_point : int or None, default=None
        Clean rows before the change; None: ``window_size`` (the window is full of clean
        rows when the shift starts, and no alarm is possible before).
    max_factor : float, default=10.0
        Clean streams stop at ``max_factor * ert`` steps (censored), shifted ones after
        ``max_factor * ert`` shifted rows (a miss).
    n_bootstraps : int or None, default=None
        Simulated streams of the threshold configuration (None: the detector's default).
    bootstraps_per_ert : float or None, default=None
        Instead of ``n_bootstraps``: ``ceil(bootstraps_per_ert x ert)`` simulated streams
        for each ERT. About ``n_bootstraps / ert`` simulated streams lie above the last
        threshold, so the hazard, and the ERT, are off by about
        ``1 / sqrt(bootstraps_per_ert)`` (relative): 100 gives about 10% at every ERT.
    cvm_calibration : {"reference", "gaussian"}, default="reference"
        ``calibration`` of ``cvm_online``. ``"reference"`` simulates streams of permuted
        reference rows and keeps the features' joint law: the ERT holds on dependent
        features (DGP's distances to the class means). ``"gaussian"``, alibi-detect's way,
        calibrates each feature on independent Gaussian streams: on dependent features the
        run time is longer than the ERT.
    reference_splits : int, default=1
        Independent reference splits: each draws its own ``n_ref`` reference rows, fits and
        configures its own detectors and runs ``n_streams`` clean and ``n_shift_streams``
        shifted streams on its own held-out rows. The thresholds hold the ERT on average
        over references; the run time given one reference errs by a few to some tens of
        percent, so an interval of the ERT must rest on several references as its units
        (:func:`dgpbench.online.stream_report.summarise_streams`).
    seed : int, default=0
        Seed of the splits, the configurations and the streams (split 0 uses ``seed``
        itself, the others seeds derived from it).

    Returns
    -------
    DataFrame
        Columns ``split``, ``detector``, ``ert``, ``shift`` (``none`` for clean streams),
        ``stream``, ``value`` (run time or delay; NaN for a miss), ``censored`` (a clean
        stream without an alarm, or a shifted stream without one: a miss), ``false_alarm``
        (an alarm before the change), ``n_ref``, ``window_size``, ``change_point``,
        ``n_features``.

    Raises
    ------
    ValueError
        If a name, a key or a size does not fit.
    """
    if "clean" not in features:
        raise ValueError("the features hold no 'clean' array")
    clean = np.asarray(features["clean"], dtype=np.float64)
    unknown = [d for d in detectors if d not in ONLINE_DETECTORS]
    if unknown:
        raise ValueError(f"unknown online detector(s) {unknown}; known: {sorted(ONLINE_DETECTORS)}")
    missing = [s for s in shifts if s not in features or s == "clean"]
    if missing:
        have = sorted(k for k in features if k not in ("clean", "classes"))
        raise ValueError(f"the features hold no shifted set(s) {missing}; they hold {have}")
    for key in shifts:
        if np.shape(features[key]) != clean.shape:
            raise ValueError(
                f"shifted set {key} has shape {np.shape(features[key])}, the clean set "
                f"{clean.shape}: a shifted row must be the twin of the clean row"
            )
    if not erts or min(erts) < 1 or n_streams < 1 or n_shift_streams < 0:
        raise ValueError("erts, n_streams must be positive and n_shift_streams 0 or more")
    if n_bootstraps is not None and bootstraps_per_ert is not None:
        raise ValueError("give n_bootstraps or bootstraps_per_ert, not both")
    if bootstraps_per_ert is not None and not bootstraps_per_ert > 0:
        raise ValueError(f"bootstraps_per_ert must be positive, got {bootstraps_per_ert!r}")
    if cvm_calibration not in ("reference", "gaussian"):
        raise ValueError(
            f"cvm_calibration must be 'reference' or 'gaussian', got {cvm_calibration!r}"
        )
    change_point = window_size if change_point is None else change_point
    if change_point < 0:
        raise ValueError(f"change_point must be 0 or more, got {change_point}")
    if isinstance(reference_splits, bool) or not isinstance(reference_splits, (int, np.integer)):
        raise TypeError(f"reference_splits must be an integer, got {reference_splits!r}")
    if reference_splits < 1:
        raise ValueError(f"reference_splits must be 1 or more, got {reference_splits}")
    rows = []
    for split in range(int(reference_splits)):
        # Split 0 keeps `seed` (one split gives the records it always gave).
        split_seed = (
            seed if split == 0 else int(np.random.SeedSequence([seed, split]).generate_state(1)[0])
        )
        ref_idx, held_idx = split_reference(len(clean), n_ref, split_seed)
        ref, pool = clean[ref_idx], clean[held_idx]
        # One independent seed per use: (detector, ERT) -> configuration, clean streams, shifts.
        children = iter(np.random.SeedSequence(split_seed).spawn(len(detectors) * len(erts)))
        for name, ert in ((name, ert) for name in detectors for ert in erts):
            seeds = [int(s.generate_state(1)[0]) for s in next(children).spawn(2 + len(shifts))]
            params = {"ert": ert, "window_size": window_size, "random_state": seeds[0]}
            if n_bootstraps is not None:
                params["n_bootstraps"] = n_bootstraps
            elif bootstraps_per_ert is not None:
                params["n_bootstraps"] = int(np.ceil(bootstraps_per_ert * ert))
            if name == "cvm_online":
                params["calibration"] = cvm_calibration
            det = ONLINE_DETECTORS[name](**params).fit(ref)
            limit = max(1, int(np.ceil(max_factor * ert)))
            times, cens = clean_run_times(det, pool, n_streams, limit, seeds[1],
                                          window_size=window_size)  # fmt: skip
            rows += [
                (split, name, ert, "none", k, float(t), bool(c), False)
                for k, (t, c) in enumerate(zip(times, cens, strict=True))
            ]
            for key, key_seed in zip(shifts, seeds[2:], strict=True):
                shifted = np.asarray(features[key], dtype=np.float64)[held_idx]
                delays = shift_delays(det, pool, shifted, change_point, n_shift_streams, limit,
                                      key_seed, window_size=window_size)  # fmt: skip
                rows += [
                    (split, name, ert, key, k, float(d), bool(np.isnan(d)), bool(d <= 0))
                    for k, d in enumerate(delays)
                ]
    columns = ["split", "detector", "ert", "shift", "stream", "value", "censored", "false_alarm"]
    return pd.DataFrame(rows, columns=columns).assign(
        n_ref=n_ref, window_size=window_size, change_point=change_point, n_features=clean.shape[1]
    )
