"""Read a ``torch.export`` program (``.pt2``) as a plain ``nn.Sequential``, running no code from it.

``torch.export.load`` is not safe on an untrusted file: in torch 2.x it unpickles with
``weights_only=False`` whenever the archive says a weight or constant is pickled
(``use_pickle``), for legacy weight files, for "opaque" constants (``pickle.loads``) and as a
fallback for the sample inputs (``torch._export.serde.serialize.deserialize_torch_artifact``).
Any of these runs code the file chooses. This module therefore never calls it: it reads the
archive's zip entries itself,

* the graph, ``<archive>/models/<name>.json`` (JSON, torch's ``schema.ExportedProgram``);
* the weights, ``<archive>/data/weights/<file>``: raw little-endian tensor bytes laid out as
  ``model_weights_config.json`` (JSON) describes; a weight marked ``use_pickle`` is refused,
  and the sample inputs (a pickle) are never opened;

The archive obeys the rules of :mod:`dgpbench.npz` (declared sizes within
``$DGPBENCH_MAX_INPUT_BYTES``, stored or deflated members, no duplicate entries), and every
weight's declared layout must fit the bytes stored for it and the layer that uses it before
it is read, so a small file cannot make this reader allocate gigabytes.

It rebuilds the network from the graph, which must be one chain of supported ATen operators
(the graph of an ``nn.Sequential`` of the layers below, exported in eval mode):

* ``aten.linear`` -> ``nn.Linear``;
* ``aten.relu`` / ``tanh`` / ``sigmoid`` / ``leaky_relu`` / ``gelu`` -> the activation module;
* ``aten.conv2d`` -> ``nn.Conv2d``; ``aten.max_pool2d`` / ``avg_pool2d`` -> pooling modules;
* ``aten.flatten`` -> ``nn.Flatten``; ``aten.dropout`` / ``clone`` / ``contiguous`` -> identity.

Anything else (another operator, a branch, a buffer, a constant) is refused with an error
naming it: re-export the model as an ``nn.Sequential`` of these layers, or pass it as
``package.module:factory`` (see :mod:`dgpbench.models.specs`).
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dgpbench.npz import check_zip_archive, max_input_bytes

__all__ = ["ExportedModelError", "load_exported"]

# torch._export.serde.schema.ScalarType codes of the dtypes a detector's network may use.
_DTYPES = {6: np.float16, 7: np.float32, 8: np.float64}
# The other codes, for the error message (torch._export.serde.schema.ScalarType).
_OTHER_DTYPES = {
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    9: "complex32",
    10: "complex64",
    11: "complex128",
    12: "bool",
    13: "bfloat16",
    28: "uint16",
    29: "float8_e4m3fn",
    30: "float8_e5m2",
    31: "float8_e4m3fnuz",
    32: "float8_e5m2fnuz",
    33: "float8_e8m0fnu",
    34: "uint32",
    35: "uint64",
}
_MAX_GRAPH_BYTES = 64 * 2**20  # the JSON graph of a small network is kilobytes
# The number of dimensions of each operator's weight and bias (checked before reading them).
_WEIGHT_NDIM = {"linear": 2, "conv2d": 4}


class ExportedModelError(ValueError):
    """A ``.pt2`` file that cannot be read as a plain network (the message says why)."""


def _arg(node: dict[str, Any], name: str, position: int, default: Any = None) -> Any:
    """The value of a node's argument by name (torch serialises every argument with its name)."""
    inputs = node.get("inputs", [])
    for item in inputs:
        if item.get("name") == name:
            return _value(item.get("arg", {}))
    if position < len(inputs) and "name" not in inputs[position]:
        return _value(inputs[position].get("arg", {}))
    return default


def _value(arg: dict[str, Any]) -> Any:
    """Decode one serialised argument (tensor reference, int(s), float, bool, None)."""
    if not isinstance(arg, dict) or len(arg) != 1:
        raise ExportedModelError(f"unexpected argument encoding {arg!r}")
    ((kind, value),) = arg.items()
    if kind == "as_tensor":
        return ("tensor", value["name"])
    if kind in ("as_int", "as_float", "as_bool", "as_string"):
        return value
    if kind == "as_ints":
        return [int(v) for v in value]
    if kind == "as_none":
        return None
    raise ExportedModelError(f"argument of kind {kind!r} is not supported (symbolic or custom)")


def _pair(value: Any, default: tuple[int, int]) -> tuple[int, int]:
    if value is None or value == []:
        return default
    value = list(value)
    if len(value) == 1:
        value = value * 2
    return (int(value[0]), int(value[1]))


def _linear(node: dict, weight: Callable[..., torch.Tensor]) -> nn.Module:
    w = weight(_arg(node, "weight", 1), "linear")
    bias = _arg(node, "bias", 2)
    b = None if bias is None else weight(bias, "linear", bias_of=w)
    layer = nn.Linear(w.shape[1], w.shape[0], bias=bias is not None, dtype=w.dtype)
    with torch.no_grad():
        layer.weight.copy_(w)
        if bias is not None:
            layer.bias.copy_(b)
    return layer


def _conv2d(node: dict, weight: Callable[..., torch.Tensor]) -> nn.Module:
    w = weight(_arg(node, "weight", 1), "conv2d")
    bias = _arg(node, "bias", 2)
    b = None if bias is None else weight(bias, "conv2d", bias_of=w)
    groups = int(_arg(node, "groups", 6, 1))
    padding = _arg(node, "padding", 4, [0, 0])
    if isinstance(padding, str):
        raise ExportedModelError(f"conv2d padding {padding!r} is not supported: give numbers")
    layer = nn.Conv2d(
        w.shape[1] * groups,
        w.shape[0],
        kernel_size=tuple(w.shape[2:]),
        stride=_pair(_arg(node, "stride", 3), (1, 1)),
        padding=_pair(padding, (0, 0)),
        dilation=_pair(_arg(node, "dilation", 5), (1, 1)),
        groups=groups,
        bias=bias is not None,
        dtype=w.dtype,
    )
    with torch.no_grad():
        layer.weight.copy_(w)
        if bias is not None:
            layer.bias.copy_(b)
    return layer


def _max_pool2d(node: dict, _: Any) -> nn.Module:
    kernel = _pair(_arg(node, "kernel_size", 1), (1, 1))
    return nn.MaxPool2d(
        kernel,
        stride=_pair(_arg(node, "stride", 2), kernel),
        padding=_pair(_arg(node, "padding", 3), (0, 0)),
        dilation=_pair(_arg(node, "dilation", 4), (1, 1)),
        ceil_mode=bool(_arg(node, "ceil_mode", 5, False)),
    )


def _avg_pool2d(node: dict, _: Any) -> nn.Module:
    kernel = _pair(_arg(node, "kernel_size", 1), (1, 1))
    if _arg(node, "divisor_override", 6) is not None:
        raise ExportedModelError("avg_pool2d with divisor_override is not supported")
    return nn.AvgPool2d(
        kernel,
        stride=_pair(_arg(node, "stride", 2), kernel),
        padding=_pair(_arg(node, "padding", 3), (0, 0)),
        ceil_mode=bool(_arg(node, "ceil_mode", 4, False)),
        count_include_pad=bool(_arg(node, "count_include_pad", 5, True)),
    )


def _flatten(node: dict, _: Any) -> nn.Module:
    return nn.Flatten(int(_arg(node, "start_dim", 1, 0)), int(_arg(node, "end_dim", 2, -1)))


def _leaky_relu(node: dict, _: Any) -> nn.Module:
    return nn.LeakyReLU(float(_arg(node, "negative_slope", 1, 0.01)))


def _gelu(node: dict, _: Any) -> nn.Module:
    return nn.GELU(approximate=str(_arg(node, "approximate", 1, "none")))


def _dropout(node: dict, _: Any) -> nn.Module:
    if _arg(node, "train", 2, False):
        raise ExportedModelError("dropout exported in training mode: export the model in eval()")
    return nn.Identity()


_OPS: dict[str, Callable[[dict, Any], nn.Module]] = {
    "torch.ops.aten.linear.default": _linear,
    "torch.ops.aten.conv2d.default": _conv2d,
    "torch.ops.aten.max_pool2d.default": _max_pool2d,
    "torch.ops.aten.avg_pool2d.default": _avg_pool2d,
    "torch.ops.aten.flatten.using_ints": _flatten,
    "torch.ops.aten.relu.default": lambda node, _: nn.ReLU(),
    "torch.ops.aten.tanh.default": lambda node, _: nn.Tanh(),
    "torch.ops.aten.sigmoid.default": lambda node, _: nn.Sigmoid(),
    "torch.ops.aten.leaky_relu.default": _leaky_relu,
    "torch.ops.aten.gelu.default": _gelu,
    # eval-mode identities
    "torch.ops.aten.dropout.default": _dropout,
    "torch.ops.aten.clone.default": lambda node, _: nn.Identity(),
    "torch.ops.aten.contiguous.default": lambda node, _: nn.Identity(),
}


class _Archive:
    """The entries of a ``.pt2`` zip, under its single top-level folder."""

    def __init__(self, zf: zipfile.ZipFile, path: Path) -> None:
        self.zf = zf
        self.path = path
        names = zf.namelist()
        if len(set(names)) != len(names):
            # zipfile reads the last of two same-named entries, torch the first: refuse
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ExportedModelError(
                f"{path} has duplicate entries {dup[:3]}: readers disagree on which one "
                "counts; re-save it with torch.export.save"
            )
        tops = {n.split("/", 1)[0] for n in names if "/" in n}
        if len(tops) != 1:
            raise ExportedModelError(
                f"{path} is not a torch.export archive (expected one top-level folder, "
                f"found {sorted(tops)[:5]})"
            )
        self.prefix = tops.pop() + "/"
        self.names = set(names)

    def read(self, name: str, limit: int = _MAX_GRAPH_BYTES) -> bytes:
        full = self.prefix + name
        if full not in self.names:
            raise ExportedModelError(f"{self.path} has no entry {name!r}: not a torch.export file")
        if self.zf.getinfo(full).file_size > limit:
            raise ExportedModelError(f"{self.path}: entry {name!r} is implausibly large")
        return self.zf.read(full)

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.read(name))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ExportedModelError(
                f"{self.path}: entry {name!r} is not valid JSON ({exc})"
            ) from exc


def _tensor_meta_shape(meta: dict[str, Any], what: str) -> tuple[list[int], list[int], int]:
    try:
        sizes = [int(s["as_int"]) for s in meta["sizes"]]
        strides = [int(s["as_int"]) for s in meta["strides"]]
        offset = int(meta.get("storage_offset", {"as_int": 0})["as_int"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ExportedModelError(f"{what} has a symbolic or malformed shape") from exc
    if len(sizes) != len(strides) or min(sizes + strides + [offset], default=0) < 0:
        raise ExportedModelError(f"{what} has an invalid layout")
    return sizes, strides, offset


class _Weights:
    """The weights of an archive, declared up front and read one at a time on request.

    Every weight's layout is checked against its file before any is read: its values must
    fit in the bytes stored (no zero or overlapping strides that turn a few bytes into
    gigabytes), and :meth:`get` checks its shape against the operator that uses it before
    materialising it.
    """

    def __init__(self, archive: _Archive, model: str) -> None:
        self.archive = archive
        config = archive.json(f"data/weights/{model}_weights_config.json")
        if not isinstance(config, dict) or not isinstance(config.get("config", {}), dict):
            raise ExportedModelError(f"{archive.path}: malformed weights config")
        self.meta: dict[str, tuple] = {}
        for name, meta in config.get("config", {}).items():
            what = f"{archive.path}: weight {name!r}"
            if not isinstance(meta, dict):
                raise ExportedModelError(f"{what}: malformed entry")
            if meta.get("use_pickle"):
                raise ExportedModelError(
                    f"{what} is stored as a pickle, which dgpbench does not load (unpickling "
                    "can run code); re-save the model with torch.export.save from plain tensors"
                )
            tmeta = meta.get("tensor_meta") or {}
            code = tmeta.get("dtype") if isinstance(tmeta, dict) else None
            dtype = _DTYPES.get(code) if isinstance(code, int) else None
            if dtype is None:
                kind = _OTHER_DTYPES.get(code, "unknown") if isinstance(code, int) else "unknown"
                raise ExportedModelError(
                    f"{what} has dtype {kind} (torch.export code {code!r}): dgpbench reads "
                    "float16, float32 and float64 weights; convert the model first, e.g. "
                    "model.float() before torch.export.export"
                )
            sizes, strides, offset = _tensor_meta_shape(tmeta, what)
            member = f"data/weights/{meta.get('path_name')}"
            full = archive.prefix + member
            if full not in archive.names:
                raise ExportedModelError(f"{what}: its data {member!r} is not in the archive")
            item = np.dtype(dtype).itemsize
            stored = archive.zf.getinfo(full).file_size // item
            n = math.prod(sizes)
            last = offset + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
            if n and (last >= stored or n > stored - offset):
                raise ExportedModelError(
                    f"{what} declares shape {sizes} with strides {strides} ({n} values) but "
                    f"its data holds {stored} values: truncated or forged"
                )
            self.meta[name] = (what, dtype, sizes, strides, offset, member)

    def get(self, name: str, op: str, bias_of: torch.Tensor | None = None) -> torch.Tensor:
        """Weight ``name`` of an ``op`` layer, its shape checked before it is read."""
        what, dtype, sizes, strides, offset, member = self.meta[name]
        ndim = 1 if bias_of is not None else _WEIGHT_NDIM[op]
        if len(sizes) != ndim or (bias_of is not None and sizes != [bias_of.shape[0]]):
            expected = (
                f"[{bias_of.shape[0]}] (the bias of {bias_of.shape[0]} outputs)"
                if bias_of is not None
                else f"{ndim} dimensions"
            )
            raise ExportedModelError(
                f"{what} of the {op} layer has shape {sizes}, expected {expected}"
            )
        raw = self.archive.read(member, limit=max_input_bytes())
        if len(raw) % np.dtype(dtype).itemsize:
            raise ExportedModelError(
                f"{what}: its data has {len(raw)} bytes, not a whole number of "
                f"{np.dtype(dtype).name} values (truncated or corrupt)"
            )
        flat = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
        item = flat.itemsize
        view = np.lib.stride_tricks.as_strided(
            flat[offset:], shape=sizes, strides=[s * item for s in strides], writeable=False
        )
        return torch.from_numpy(np.array(view, dtype=dtype))


def load_exported(path: str | os.PathLike[str]) -> tuple[nn.Sequential, tuple[int, ...] | None]:
    """Rebuild the network of a ``torch.export.save`` file without running code from it.

    Parameters
    ----------
    path : path-like
        A ``.pt2`` archive written by ``torch.export.save`` of an ``nn.Sequential`` (or any
        module whose graph is one chain of the supported layers; see the module docstring).

    Returns
    -------
    module : torch.nn.Sequential
        The network, in eval mode.
    input_shape : tuple of int or None
        The shape of one input sample as exported (e.g. ``(1, 28, 28)``), None if symbolic.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ExportedModelError
        If the file is not a readable archive, is larger than ``$DGPBENCH_MAX_INPUT_BYTES``
        (see :mod:`dgpbench.npz`), has duplicate entries, holds pickled data or weights
        whose layout does not fit their data or their layer, or its graph is not a chain
        of supported operators (the message names the first unsupported one). Any other
        malformation is an ``ExportedModelError`` naming the file and the cause.

    Examples
    --------
    >>> import tempfile, torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    >>> path = tempfile.mkdtemp() + "/net.pt2"
    >>> torch.export.save(torch.export.export(net.eval(), (torch.zeros(1, 4),)), path)
    >>> module, shape = load_exported(path)
    >>> [type(m).__name__ for m in module], shape
    (['Linear', 'ReLU', 'Linear'], (4,))
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    try:
        return _load(path)
    except ExportedModelError:
        raise
    except Exception as exc:  # malformed JSON values, damaged zip data, a recursion bomb...
        lines = str(exc).strip().splitlines()
        raise ExportedModelError(
            f"{path}: malformed torch.export file ({type(exc).__name__}: "
            f"{lines[0] if lines else ''}); re-save it with torch.export.save"
        ) from exc


def _load(path: Path) -> tuple[nn.Sequential, tuple[int, ...] | None]:
    try:
        check_zip_archive(path, "torch.export file")  # $DGPBENCH_MAX_INPUT_BYTES, methods
    except ValueError as exc:
        raise ExportedModelError(str(exc)) from exc
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ExportedModelError(f"{path} is not a torch.export archive (.pt2): {exc}") from exc
    with zf:
        archive = _Archive(zf, path)
        if archive.read("archive_format").strip() != b"pt2":
            raise ExportedModelError(f"{path}: unknown archive format")
        byteorder = (
            archive.read("byteorder").strip()
            if archive.prefix + "byteorder" in archive.names
            else b"little"
        )
        if byteorder != b"little":
            raise ExportedModelError(f"{path}: byte order {byteorder!r} is not supported")
        models = sorted(n for n in archive.names if n.startswith(archive.prefix + "models/"))
        if len(models) != 1 or not models[0].endswith(".json"):
            raise ExportedModelError(
                f"{path} holds {len(models)} programs (expected one models/<name>.json)"
            )
        name = models[0][len(archive.prefix + "models/") : -len(".json")]
        program = archive.json(f"models/{name}.json")
        constants_file = f"data/constants/{name}_constants_config.json"
        if archive.prefix + constants_file in archive.names and archive.json(constants_file).get(
            "config"
        ):
            raise ExportedModelError(
                f"{path}: the program has constants (tensor constants or custom objects), "
                "which dgpbench does not read; export a plain nn.Sequential"
            )
        _signature(program, path)  # refuse buffers etc. before reading any weight
        weights = _Weights(archive, name)
        return _build(program, weights, path)


def _signature(program: dict[str, Any], path: Path) -> tuple[dict[str, str], list[str], list]:
    """Parameter names by graph input, the user inputs and the outputs of a program."""
    try:
        signature = program["graph_module"]["signature"]
        params: dict[str, str] = {}
        user_inputs = []
        for spec in signature.get("input_specs", []):
            if "parameter" in spec:
                params[spec["parameter"]["arg"]["name"]] = spec["parameter"]["parameter_name"]
            elif "user_input" in spec:
                user_inputs.append(spec["user_input"]["arg"]["as_tensor"]["name"])
            else:
                kind = next(iter(spec), "?")
                raise ExportedModelError(
                    f"{path}: input of kind {kind!r} (e.g. a BatchNorm buffer) is not "
                    "supported; export a network of linear, convolution, pooling and "
                    "activation layers, or pass it as 'package.module:factory'"
                )
        outputs = signature.get("output_specs", [])
    except (KeyError, TypeError, AttributeError) as exc:
        raise ExportedModelError(f"{path}: malformed program signature ({exc})") from exc
    if len(user_inputs) != 1 or len(outputs) != 1 or "user_output" not in outputs[0]:
        raise ExportedModelError(
            f"{path}: the program must take one input tensor and return one output tensor"
        )
    return params, user_inputs, outputs


def _build(
    program: dict[str, Any], weights: _Weights, path: Path
) -> tuple[nn.Sequential, tuple[int, ...] | None]:
    try:
        graph = program["graph_module"]["graph"]
    except (KeyError, TypeError) as exc:
        raise ExportedModelError(f"{path}: the program has no graph ({exc})") from exc
    params, user_inputs, outputs = _signature(program, path)

    def weight(ref: Any, op: str, bias_of: torch.Tensor | None = None) -> torch.Tensor:
        if not (isinstance(ref, tuple) and ref[0] == "tensor" and ref[1] in params):
            raise ExportedModelError(f"{path}: a layer's weight is not a parameter ({ref!r})")
        key = params[ref[1]]
        if key not in weights.meta:
            raise ExportedModelError(f"{path}: parameter {key!r} has no stored weight")
        return weights.get(key, op, bias_of)

    current = user_inputs[0]
    layers: list[nn.Module] = []
    for node in graph.get("nodes", []):
        target = str(node.get("target"))
        build = _OPS.get(target)
        if build is None:
            supported = sorted(t.split(".")[3] for t in _OPS)
            raise ExportedModelError(
                f"{path}: operator {target} is not supported (dgpbench reads chains of "
                f"{', '.join(supported)}); re-export an nn.Sequential of such layers or pass "
                "the model as 'package.module:factory'"
            )
        inputs = node.get("inputs") or [{}]
        source = _value(inputs[0].get("arg", {}))  # every supported op takes its input first
        outs = node.get("outputs", [])
        if source != ("tensor", current) or len(outs) != 1 or "as_tensor" not in outs[0]:
            raise ExportedModelError(
                f"{path}: the graph is not a single chain of layers (at {target}); "
                "export an nn.Sequential"
            )
        layers.append(build(node, weight))
        current = outs[0]["as_tensor"]["name"]
    if outputs[0]["user_output"]["arg"].get("as_tensor", {}).get("name") != current:
        raise ExportedModelError(f"{path}: the program's output is not its last layer's")
    if not layers:
        raise ExportedModelError(f"{path}: the program has no layers")
    meta = graph.get("tensor_values", {}).get(user_inputs[0], {})
    try:
        shape = tuple(int(s["as_int"]) for s in meta["sizes"][1:])
    except (KeyError, TypeError, ValueError):
        shape = None
    return nn.Sequential(*layers).eval(), shape
