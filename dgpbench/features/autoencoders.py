"""Convolutional autoencoders of "Failing loudly": untrained (UAE) and trained (TAE) encoders.

The architectures are Rabanser et al.'s (``shift_reductor.py``), rebuilt in torch:

* ``"mnist"`` (their MNIST / Fashion-MNIST): conv 16, pool, conv 8, pool, conv 2, pool ->
  a 2 x 4 x 4 = 32-dimensional code for 28 x 28 images; the decoder mirrors it (its third
  convolution is unpadded, 16 -> 14, so the output is 28 x 28 again);
* ``"cifar10"`` (their CIFAR-10 / SVHN / COIL-100): conv 64, 32, 16 with pooling -> a
  16 x 4 x 4 = 256-dimensional code for 32 x 32 x 3 images;
* ``"mnist_usps"``: conv 8, pool, conv 2, pool -> 2 x (H/4) x (W/4) (the small one, used
  here for 8 x 8 digits: an 8-dimensional code).

All convolutions are 3 x 3 with ReLU ("same" padding unless noted), pooling is 2 x 2 with
Keras' "same" rounding (``ceil_mode``), upsampling is nearest-neighbour, and the decoder ends
in a sigmoid. Weights start as Keras' defaults (Glorot-uniform kernels, zero biases) from a
seeded generator. TAE trains the whole autoencoder on the fit images with binary
cross-entropy and SGD (learning rate 0.01, momentum 0.9, batch 128, as Rabanser et al.;
their 200 epochs are the default) and keeps the encoder. If a decoder's output size
differs from the input's (image sizes the architecture was not made for), it is resized to
the input's by nearest-neighbour interpolation before the loss.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from dgpbench._compat import fit_context
from dgpbench._device import resolve_device
from dgpbench.parameters import TAE_RULES, UAE_RULES, sklearn_constraints
from dgpbench.progress import Progress

__all__ = [
    "ARCHITECTURES",
    "AUTOENCODER_FORMAT",
    "TAEFeatures",
    "UAEFeatures",
    "build_autoencoder",
    "load_autoencoder",
    "save_autoencoder",
]

#: Rabanser et al.'s autoencoders: (encoder channels, decoder channels, unpadded decoder conv).
ARCHITECTURES: dict[str, tuple[tuple[int, ...], tuple[int, ...], int | None]] = {
    "mnist": ((16, 8, 2), (2, 8, 16), 2),
    "cifar10": ((64, 32, 16), (16, 32, 64), None),
    "mnist_usps": ((8, 2), (2, 8), None),
}
AUTOENCODER_FORMAT = "dgpbench-autoencoder"
_VERSION = 1


def _auto_architecture(image_shape: tuple[int, int, int]) -> str:
    c, h, w = image_shape
    if c == 3:
        return "cifar10"
    return "mnist" if min(h, w) >= 16 else "mnist_usps"


def build_autoencoder(architecture: str, image_shape: tuple[int, int, int], seed: int):
    """Build ``(encoder, decoder)`` torch modules of a named architecture, seeded.

    Parameters
    ----------
    architecture : {"mnist", "cifar10", "mnist_usps"}
        Rabanser et al.'s architecture.
    image_shape : tuple of int
        ``(C, H, W)``.
    seed : int
        Seed of the Glorot-uniform initialisation.

    Returns
    -------
    encoder, decoder : torch.nn.Sequential
    """
    import torch
    from torch import nn

    enc_ch, dec_ch, unpadded = ARCHITECTURES[architecture]
    c = image_shape[0]
    enc: list[nn.Module] = []
    prev = c
    for ch in enc_ch:
        enc += [nn.Conv2d(prev, ch, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True)]
        prev = ch
    dec: list[nn.Module] = []
    for i, ch in enumerate(dec_ch):
        dec += [nn.Conv2d(prev, ch, 3, padding=0 if i == unpadded else 1), nn.ReLU()]
        dec.append(nn.Upsample(scale_factor=2, mode="nearest"))
        prev = ch
    dec += [nn.Conv2d(prev, c, 3, padding=1), nn.Sigmoid()]
    encoder, decoder = nn.Sequential(*enc), nn.Sequential(*dec)
    gen = torch.Generator().manual_seed(int(seed))
    for module in (*encoder, *decoder):
        if isinstance(module, nn.Conv2d):
            # Keras' glorot_uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out))
            fan_in = module.in_channels * 9
            fan_out = module.out_channels * 9
            bound = float(np.sqrt(6.0 / (fan_in + fan_out)))
            with torch.no_grad():
                module.weight.uniform_(-bound, bound, generator=gen)
                module.bias.zero_()
    return encoder, decoder


def save_autoencoder(path: str | os.PathLike, est: TAEFeatures | UAEFeatures) -> Path:
    """Write a fitted UAE/TAE's autoencoder (weights + SHA-256 + architecture) atomically.

    Parameters
    ----------
    path : str or path-like
        Target ``.pt`` file.
    est : UAEFeatures or TAEFeatures
        A fitted representation.

    Returns
    -------
    pathlib.Path
    """
    import torch

    from dgpbench.io import atomic_path
    from dgpbench.models.checkpoints import weights_digest

    check_is_fitted(est, "encoder_")
    state = {
        **{f"encoder.{k}": v.detach().cpu().clone() for k, v in est.encoder_.state_dict().items()},
        **{f"decoder.{k}": v.detach().cpu().clone() for k, v in est.decoder_.state_dict().items()},
    }
    payload = {
        "format": AUTOENCODER_FORMAT,
        "version": _VERSION,
        "architecture": est.architecture_,
        "image_shape": list(est.image_shape_),
        "state_dict": state,
        "weights_sha256": weights_digest(state),
    }
    path = Path(path)
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(payload, tmp)
    return path


def load_autoencoder(path: str | os.PathLike) -> tuple[Any, Any, str, tuple[int, int, int]]:
    """Read an autoencoder written by :func:`save_autoencoder` (no pickle: weights only).

    Returns
    -------
    encoder, decoder : torch.nn.Sequential
        In ``eval()`` mode.
    architecture : str
    image_shape : tuple of int

    Raises
    ------
    ValueError
        If the file is missing, unreadable, not a dgpbench autoencoder, or its weights do
        not match their stored SHA-256.
    """
    import torch

    from dgpbench.models.checkpoints import weights_digest

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"autoencoder checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # weights-only unpickling errors have no stable type
        raise ValueError(f"cannot read autoencoder checkpoint {path}: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("format") != AUTOENCODER_FORMAT:
        raise ValueError(f"{path} is not a dgpbench autoencoder checkpoint (no format tag)")
    if payload.get("version") != _VERSION:
        raise ValueError(f"{path}: unsupported autoencoder version {payload.get('version')!r}")
    state = payload["state_dict"]
    if weights_digest(state) != payload.get("weights_sha256"):
        raise ValueError(f"{path}: weights do not match their SHA-256 (truncated or corrupt)")
    architecture = str(payload["architecture"])
    if architecture not in ARCHITECTURES:
        raise ValueError(f"{path}: unknown architecture {architecture!r}")
    shape = tuple(int(s) for s in payload["image_shape"])
    encoder, decoder = build_autoencoder(architecture, shape, 0)
    encoder.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith("encoder.")})
    decoder.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith("decoder.")})
    return encoder.eval(), decoder.eval(), architecture, shape


def _image_shape(X: Any, given: Any) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in np.shape(X))
    if given is not None:
        return tuple(int(s) for s in given)
    if len(shape) == 4:
        return shape[1:]
    if len(shape) == 3:
        return (1, *shape[1:])
    if len(shape) == 2:
        d = shape[1]
        for c in (1, 3):
            s = round((d / c) ** 0.5)
            if c * s * s == d:
                return (c, s, s)
    raise ValueError(
        f"cannot tell the image shape of X with shape {shape}: pass (N, C, H, W) images or "
        "image_shape=(C, H, W)"
    )


class _Autoencoder(TransformerMixin, BaseEstimator):
    """Shared: image handling, the encoder's forward pass in chunks (``batch_size``,
    ``device``).
    """

    _prefix: ClassVar[str] = "ae"
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(UAE_RULES)

    def _images(self, X: Any, *, reset: bool) -> np.ndarray:
        if hasattr(X, "detach"):
            X = X.detach().cpu().numpy()
        if reset:
            self.image_shape_ = _image_shape(X, self.image_shape)
        flat = validate_data(self, np.asarray(X).reshape(len(X), -1), reset=reset, dtype=np.float32)
        if flat.shape[1] != int(np.prod(self.image_shape_)):
            raise ValueError(
                f"X has {flat.shape[1]} values per sample but image_shape is {self.image_shape_}"
            )
        return flat.reshape(len(flat), *self.image_shape_)

    def _setup(self, X: np.ndarray) -> None:
        self.architecture_ = (
            _auto_architecture(self.image_shape_)
            if self.architecture == "auto"
            else self.architecture
        )
        self.encoder_, self.decoder_ = build_autoencoder(
            self.architecture_, self.image_shape_, self.random_state
        )

    def transform(self, X: Any) -> np.ndarray:
        """The encoder's code of every image, flattened.

        Parameters
        ----------
        X : array-like of shape (n_samples, C, H, W), (n_samples, H, W) or (n_samples, C * H * W)
            Images of the reference images' shape.

        Returns
        -------
        ndarray of shape (n, code size)
            The codes as float64.
        """
        import torch

        check_is_fitted(self, "encoder_")
        X = self._images(X, reset=False)
        device = resolve_device(self.device)
        enc = self.encoder_.to(device).eval()
        out = []
        with torch.no_grad():
            for start in range(0, len(X), self.batch_size):
                xb = torch.as_tensor(X[start : start + self.batch_size], device=device)
                out.append(enc(xb).flatten(1).cpu().numpy())
        self.encoder_.cpu()
        return np.concatenate(out).astype(np.float64)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names ``<uae|tae>_code<k>`` of the code's entries.

        Parameters
        ----------
        input_features : ignored
            Present for API consistency.

        Returns
        -------
        ndarray of str
            One name per output column.
        """
        check_is_fitted(self, "encoder_")
        n = self.transform(np.zeros((1, *self.image_shape_), dtype=np.float32)).shape[1]
        return np.asarray([f"{self._prefix}_code{k}" for k in range(n)], dtype=object)

    # -- saved state (dgpbench.saved) ------------------------------------------------------
    #: The fitted attributes :meth:`get_state` stores; whether a fitted one has a loss curve.
    _state_attributes: ClassVar[frozenset[str]] = frozenset(
        ("image_shape_", "n_features_in_", "architecture_", "encoder_", "decoder_", "loss_curve_")
    )
    _trained: ClassVar[bool] = False

    def get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fitted state as JSON values and arrays (see :mod:`dgpbench.state`).

        Returns
        -------
        state : dict
            The image shape, the architecture, the names of the weights and the loss curve.
        arrays : dict of str to ndarray
            The encoder's and decoder's weights, ``encoder/<name>`` and ``decoder/<name>``.

        Raises
        ------
        TypeError
            If the transformer holds state this method does not store.
        """
        from dgpbench.state import check_attributes

        check_attributes(self, self._state_attributes)
        state: dict[str, Any] = {
            "image_shape_": [int(v) for v in self.image_shape_],
            "n_features_in_": int(self.n_features_in_),
            "architecture_": str(self.architecture_),
        }
        if hasattr(self, "loss_curve_"):
            state["loss_curve_"] = [float(v) for v in self.loss_curve_]
        arrays = {}
        for part in ("encoder", "decoder"):
            weights = getattr(self, f"{part}_").state_dict()
            state[f"{part}_keys"] = sorted(weights)
            for key in sorted(weights):
                arrays[f"{part}/{key}"] = weights[key].detach().cpu().numpy()
        return state, arrays

    def set_state(self, state: dict[str, Any], arrays: Any) -> _Autoencoder:
        """Restore the state :meth:`get_state` gave, checking every value.

        Parameters
        ----------
        state : dict
            The JSON state (untrusted: every value is checked).
        arrays : mapping of str to ndarray
            The weights, read on demand: exactly the architecture's, float32 and finite.

        Returns
        -------
        self : object

        Raises
        ------
        dgpbench.state.StateError
            If a value is malformed or does not fit the architecture or another value.
        """
        import torch

        from dgpbench.state import StateError, check_keys, state_array, state_int, state_shape

        keys = ("image_shape_", "n_features_in_", "architecture_", "encoder_keys", "decoder_keys")
        if self._trained:
            check_keys(state, (*keys, "loss_curve_"))
        else:
            check_keys(state, keys, ("loss_curve_",))
        shape = state_shape(state["image_shape_"], "image_shape_", optional=False)
        if len(shape) != 3:
            raise StateError(f"image_shape_ must be (C, H, W), got {shape}")
        self.image_shape_ = shape
        self.n_features_in_ = state_int(state["n_features_in_"], "n_features_in_", 1)
        if self.n_features_in_ != int(np.prod(shape)):
            raise StateError(f"n_features_in_ = {self.n_features_in_} does not match image_shape_")
        arch = state["architecture_"]
        if not isinstance(arch, str) or arch not in ARCHITECTURES:
            raise StateError(f"unknown autoencoder architecture {arch!r}")
        self.architecture_ = arch
        if "loss_curve_" in state:
            curve = state["loss_curve_"]
            if not isinstance(curve, list) or not all(isinstance(v, float) for v in curve):
                raise StateError("loss_curve_ must be a list of numbers")
            self.loss_curve_ = curve
        encoder, decoder = build_autoencoder(arch, shape, 0)
        for part, module in (("encoder", encoder), ("decoder", decoder)):
            expected = module.state_dict()
            if state[f"{part}_keys"] != sorted(expected):
                raise StateError(f"the {part}'s weights do not fit the {arch!r} architecture")
            weights = {}
            for key, ref in expected.items():
                arr = state_array(arrays[f"{part}/{key}"], f"{part} {key}")
                if arr.shape != tuple(ref.shape) or arr.dtype != np.float32:
                    raise StateError(
                        f"{part} {key} has shape {arr.shape} {arr.dtype}, not {tuple(ref.shape)}"
                    )
                weights[key] = torch.from_numpy(np.array(arr))
            module.load_state_dict(weights)
            setattr(self, f"{part}_", module.eval())
        return self


class UAEFeatures(_Autoencoder):
    """Encoder of an untrained convolutional autoencoder ("UAE" in "Failing loudly").

    Parameters
    ----------
    architecture : {"auto", "mnist", "cifar10", "mnist_usps"}, default="auto"
        Rabanser et al.'s architecture; ``"auto"``: ``cifar10`` for 3 channels, ``mnist``
        for 1 channel of at least 16 x 16 pixels, ``mnist_usps`` for smaller images.
    image_shape : tuple of int or None, default=None
        ``(C, H, W)`` of flat input; None: from 4-D/3-D input, or a square of 1 or 3
        channels.
    random_state : int, default=0
        Seed of the random initialisation.
    batch_size : int, default=256
        Images per forward chunk.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the encoder runs.

    Attributes
    ----------
    encoder_, decoder_ : torch.nn.Sequential
        The autoencoder's halves.
    architecture_ : str
        The architecture used.
    image_shape_ : tuple of int
        ``(C, H, W)``.
    n_features_in_ : int
        Number of pixels.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((5, 1, 28, 28), dtype=np.float32)
    >>> UAEFeatures().fit(X).transform(X).shape
    (5, 32)
    """

    _prefix = "uae"

    def __init__(
        self,
        *,
        architecture: str = "auto",
        image_shape: Any = None,
        random_state: int = 0,
        batch_size: int = 256,
        device: str = "cpu",
    ) -> None:
        self.architecture = architecture
        self.image_shape = image_shape
        self.random_state = random_state
        self.batch_size = batch_size
        self.device = device

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> UAEFeatures:
        """Build the seeded, untrained autoencoder for images shaped like ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, C, H, W), (n_samples, H, W) or (n_samples, C * H * W)
            Reference images; they set ``image_shape_`` (unless ``image_shape`` is given).
        y : ignored
            Present for API consistency.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        X = self._images(X, reset=True)
        self._setup(X)
        return self


class TAEFeatures(_Autoencoder):
    """Encoder of a trained convolutional autoencoder ("TAE" in "Failing loudly").

    Parameters
    ----------
    autoencoder : path-like or None, default=None
        A checkpoint written by :func:`save_autoencoder`: ``fit`` loads it (checking its
        SHA-256 and image shape) instead of training.
    architecture, image_shape, random_state
        As for :class:`UAEFeatures`; ``random_state`` also seeds the minibatch order.
    epochs : int, default=200
        Training epochs (Rabanser et al.: 200).
    learning_rate : float, default=0.01
        SGD learning rate (momentum 0.9).
    train_batch_size : int, default=128
        Minibatch size of the training.
    batch_size : int, default=256
        Images per forward chunk of ``transform``.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the autoencoder trains and runs.
    progress : bool, default=False
        Report the training: a tqdm bar on a terminal, else one log line per epoch.

    Attributes
    ----------
    encoder_, decoder_ : torch.nn.Sequential
        The trained halves.
    loss_curve_ : list of float
        Mean binary cross-entropy per epoch (empty when loaded).
    architecture_, image_shape_, n_features_in_
        As for :class:`UAEFeatures`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((16, 1, 8, 8), dtype=np.float32)
    >>> tae = TAEFeatures(epochs=2).fit(X)
    >>> tae.transform(X).shape, len(tae.loss_curve_)
    ((16, 8), 2)
    """

    _prefix = "tae"
    _parameter_constraints: ClassVar[dict] = sklearn_constraints(TAE_RULES)

    def __init__(
        self,
        *,
        autoencoder: Any = None,
        architecture: str = "auto",
        image_shape: Any = None,
        random_state: int = 0,
        epochs: int = 200,
        learning_rate: float = 0.01,
        train_batch_size: int = 128,
        batch_size: int = 256,
        device: str = "cpu",
        progress: bool = False,
    ) -> None:
        self.autoencoder = autoencoder
        self.architecture = architecture
        self.image_shape = image_shape
        self.random_state = random_state
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.train_batch_size = train_batch_size
        self.batch_size = batch_size
        self.device = device
        self.progress = progress

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> TAEFeatures:
        """Train the autoencoder on the images ``X`` (or load ``autoencoder``).

        Parameters
        ----------
        X : array-like of shape (n_samples, C, H, W), (n_samples, H, W) or (n_samples, C * H * W)
            Reference images, pixels in [0, 1]; they set ``image_shape_`` (unless
            ``image_shape`` is given).
        y : ignored
            Present for API consistency.

        Returns
        -------
        self : object
            The fitted transformer.

        Raises
        ------
        ValueError
            If ``X`` leaves [0, 1] (binary cross-entropy compares pixels with a sigmoid's
            output), or a given checkpoint is unreadable or made for another image shape.
        """
        X = self._images(X, reset=True)
        if self.autoencoder is not None:
            enc, dec, arch, shape = load_autoencoder(self.autoencoder)
            if shape != tuple(self.image_shape_):
                raise ValueError(
                    f"autoencoder {self.autoencoder} was trained on images of shape {shape}, "
                    f"not {tuple(self.image_shape_)}"
                )
            self.encoder_, self.decoder_, self.architecture_ = enc, dec, arch
            self.loss_curve_ = []
            return self
        if X.min() < 0 or X.max() > 1:
            raise ValueError(
                f"TAE trains with binary cross-entropy on pixels in [0, 1]; X spans "
                f"[{X.min():.3g}, {X.max():.3g}]: rescale the images"
            )
        self._setup(X)
        self.loss_curve_ = self._train(X)
        return self

    def _train(self, X: np.ndarray) -> list[float]:
        import torch
        import torch.nn.functional as F

        device = resolve_device(self.device)
        net = torch.nn.Sequential(self.encoder_, self.decoder_).to(device).train()
        opt = torch.optim.SGD(net.parameters(), lr=self.learning_rate, momentum=0.9)
        gen = torch.Generator().manual_seed(int(self.random_state))
        xt = torch.as_tensor(X, device=device)
        curve: list[float] = []
        bar = Progress(self.epochs, "train tae", enabled=self.progress, unit="epoch")
        for epoch in range(1, self.epochs + 1):
            order = torch.randperm(len(xt), generator=gen).to(device)
            total = 0.0
            for start in range(0, len(xt), self.train_batch_size):
                xb = xt[order[start : start + self.train_batch_size]]
                out = net(xb)
                if out.shape[-2:] != xb.shape[-2:]:
                    out = F.interpolate(out, size=xb.shape[-2:], mode="nearest")
                loss = F.binary_cross_entropy(out, xb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(xb)
            curve.append(total / len(xt))
            bar.update(1)
            bar.log("epoch %d of %d, loss %.5f", epoch, self.epochs, curve[-1])
        bar.close()
        net.cpu().eval()
        return curve

    _trained = True  # its fitted state holds the training's loss curve
