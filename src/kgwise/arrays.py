"""Numeric arrays in JSON: ``{"dtype", "shape", "base64"}`` of the little-endian bytes — exact, and
~30× faster to write and read than nested lists of numbers (a router's d×d matrices are megabytes)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["decode_array", "encode_array"]

_DTYPES = {"float64": "<f8", "float32": "<f4", "int64": "<i8"}


def encode_array(a: npt.ArrayLike) -> dict[str, Any]:
    """``a`` as JSON-ready data (float64, float32 or int64; other types are converted to float64)."""
    arr = np.asarray(a)
    name = arr.dtype.name if arr.dtype.name in _DTYPES else "float64"
    raw = np.ascontiguousarray(arr, dtype=_DTYPES[name]).tobytes()
    return {"dtype": name, "shape": list(arr.shape), "base64": base64.b64encode(raw).decode("ascii")}


def decode_array(v: object, dtype: npt.DTypeLike = np.float64) -> npt.NDArray[Any]:
    """Inverse of :func:`encode_array`, as ``dtype``; a nested list of numbers (older files) or an array
    is read as it is. ``ValueError`` for anything else, or bytes that do not fill the shape."""
    if isinstance(v, dict):
        try:
            kind, shape, text = _DTYPES[v["dtype"]], [int(n) for n in v["shape"]], v["base64"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"an encoded array needs dtype (one of {', '.join(_DTYPES)}), shape and "
                             f"base64 ({exc!r})") from exc
        flat = np.frombuffer(base64.b64decode(text, validate=True), dtype=kind)
        if flat.size != int(np.prod(shape)):
            raise ValueError(f"an encoded array of shape {shape} holds {flat.size} numbers")
        return flat.reshape(shape).astype(dtype)
    if isinstance(v, list | np.ndarray):
        return np.asarray(v, dtype=dtype)
    raise ValueError(f"an array must be encoded ({{dtype, shape, base64}}) or a list of numbers, got "
                     f"{type(v).__name__}")
