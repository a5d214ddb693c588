"""The names that link the workflow's steps: model ids and feature keys.

Each convention has one function that writes it and one that reads it back; the package and
the workflow's rules (``workflow/rules/*.smk``) use only these.

- A shift-detection model is ``h{hidden}-l{layers}-s{seed}`` (``h16-l2-s0``) for an MLP and
  ``cnn-h{hidden}-l{layers}-s{seed}`` for a CNN (hidden width and layers of its MLP head): its
  folder under ``results/models/<dataset>/`` and the ``model`` column of the records. A
  user's own model (config ``models.user``) is ``user-<name>``, kind ``user``.
- The features of corrupted images are stored under ``<code>_<intensity>`` (``GN_3``:
  Gaussian noise at intensity 3) in a features ``.npz``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from dgpbench._validation import check_int

__all__ = [
    "MODEL_ID_PATTERN",
    "USER_MODEL_ID_PATTERN",
    "ModelId",
    "feature_key",
    "model_id",
    "model_id_template",
    "parse_feature_key",
    "parse_model_id",
]

_MODEL_ID = "h{hidden}-l{layers}-s{seed}"
# Model kind -> id prefix; MLP ids (the paper's) have none.
_KIND_PREFIX = {"mlp": "", "cnn": "cnn-", "resnet": "resnet-"}
#: Regular expression of a model id (no capturing groups), e.g. for Snakemake's wildcard
#: constraints.
MODEL_ID_PATTERN = "(?:cnn-|resnet-)?" + _MODEL_ID.format(
    hidden="[0-9]+", layers="[0-9]+", seed="[0-9]+"
)
_MODEL_ID_RE = re.compile(
    "(?:(?P<kind>cnn|resnet)-)?"
    + _MODEL_ID.format(
        hidden="(?P<hidden>[0-9]+)", layers="(?P<layers>[0-9]+)", seed="(?P<seed>[0-9]+)"
    )
)
#: Regular expression of the id ``user-<name>`` of a user's own model (config ``models.user``).
USER_MODEL_ID_PATTERN = "user-[A-Za-z0-9_]+"
_USER_ID_RE = re.compile(USER_MODEL_ID_PATTERN)
_FEATURE_KEY_RE = re.compile(r"(?P<code>[A-Za-z0-9]+)_(?P<intensity>[0-9]+)")


class ModelId(NamedTuple):
    """The parts of a model id: hidden units per layer, linear maps, seed, model kind."""

    hidden: int
    layers: int
    seed: int
    kind: str = "mlp"


def model_id(hidden: int, layers: int, seed: int, kind: str = "mlp") -> str:
    """The id ``h{hidden}-l{layers}-s{seed}`` of a shift-detection model (``cnn-`` first for
    a CNN, ``resnet-`` for a ResNet).

    Parameters
    ----------
    hidden, layers : int
        Hidden units per layer and number of linear maps (positive); a CNN's or ResNet's are
        its head's.
    seed : int
        Model seed (non-negative).
    kind : {"mlp", "cnn", "resnet"}, default="mlp"
        Model kind.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If a part is not an integer in its range, or on an unknown kind.

    Examples
    --------
    >>> model_id(16, 2, 0), model_id(16, 2, 0, kind="cnn")
    ('h16-l2-s0', 'cnn-h16-l2-s0')
    """
    if kind not in _KIND_PREFIX:
        raise ValueError(f"model kind must be one of {sorted(_KIND_PREFIX)}, got {kind!r}")
    return _KIND_PREFIX[kind] + _MODEL_ID.format(
        hidden=check_int(hidden, "hidden"),
        layers=check_int(layers, "layers"),
        seed=check_int(seed, "seed", minimum=0),
    )


def model_id_template(seed: int) -> str:
    """The model id of ``seed`` with ``{hidden}`` and ``{layers}`` left as placeholders.

    The Snakemake train rule names one architecture's per-seed outputs with it.

    Examples
    --------
    >>> model_id_template(3)
    'h{hidden}-l{layers}-s3'
    """
    return _MODEL_ID.format(
        hidden="{hidden}", layers="{layers}", seed=check_int(seed, "seed", minimum=0)
    )


def parse_model_id(text: str) -> ModelId:
    """The parts of a model id written by :func:`model_id`.

    Raises
    ------
    ValueError
        If ``text`` is not a model id.

    Examples
    --------
    >>> parse_model_id("h16-l2-s0")
    ModelId(hidden=16, layers=2, seed=0, kind='mlp')
    >>> parse_model_id("cnn-h16-l2-s0").kind
    'cnn'
    >>> parse_model_id("user-mine")
    ModelId(hidden=None, layers=None, seed=None, kind='user')
    """
    user = _USER_ID_RE.fullmatch(str(text))
    if user is not None:  # a user's own model (config models.user): no grid coordinates
        return ModelId(None, None, None, "user")  # type: ignore[arg-type]
    match = _MODEL_ID_RE.fullmatch(str(text))
    if match is None:
        raise ValueError(
            "model id must look like h16-l2-s0 (h<hidden>-l<layers>-s<seed>, cnn-h16-l2-s0 "
            f"for a CNN), got {text!r}"
        )
    return ModelId(
        int(match["hidden"]), int(match["layers"]), int(match["seed"]), match["kind"] or "mlp"
    )


def feature_key(code: str, intensity: int) -> str:
    """The ``.npz`` key ``<code>_<intensity>`` of features of corrupted images.

    Examples
    --------
    >>> feature_key("GN", 3)
    'GN_3'
    """
    key = f"{code}_{check_int(intensity, 'intensity', minimum=0)}"
    if _FEATURE_KEY_RE.fullmatch(key) is None:
        raise ValueError(f"corruption code must be letters and digits, got {code!r}")
    return key


def parse_feature_key(key: str) -> tuple[str, int]:
    """The corruption code and intensity of a key written by :func:`feature_key`.

    Raises
    ------
    ValueError
        If ``key`` is not ``<code>_<intensity>``.

    Examples
    --------
    >>> parse_feature_key("GN_3")
    ('GN', 3)
    """
    match = _FEATURE_KEY_RE.fullmatch(str(key))
    if match is None:
        raise ValueError(f"feature key must be <corruption>_<intensity> (e.g. GN_3), got {key!r}")
    return match["code"], int(match["intensity"])
