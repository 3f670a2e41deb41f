"""How a vector is stored: int8 with one float32 scale per vector (pure: no I/O).

A 512-d float32 vector is 2 KB; stored as 512 signed bytes plus its scale it is
516 bytes, and cosine rankings barely move (measured on the real sets, see
docs/benchmarks.md). Rows are decoded once per process into a float32 matrix,
renormalised so that scores stay cosines, so queries cost what they did.
"""

from __future__ import annotations

from typing import Any

SCALE_BYTES = 4


def encode(vector: Any) -> bytes:
    """``vector`` (1-d floats) as its little-endian float32 scale followed by int8 values."""
    import numpy as np

    values = np.asarray(vector, dtype=np.float32)
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    quantised = np.clip(np.rint(values / scale), -127, 127).astype(np.int8)
    return np.float32(scale).astype("<f4").tobytes() + quantised.tobytes()


def decode_matrix(blobs: list[bytes], spare_rows: int = 0) -> Any:
    """Stored vectors (all of one model, so one length) as L2-normalised float32 rows, in an
    array with ``spare_rows`` more (uninitialised) rows after them for vectors added later."""
    import numpy as np

    if not blobs:
        return np.empty((0, 0), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), -1)
    scales = raw[:, :SCALE_BYTES].copy().view("<f4").astype(np.float32)
    out = np.empty((len(blobs) + spare_rows, raw.shape[1] - SCALE_BYTES), dtype=np.float32)
    matrix = out[: len(blobs)]
    np.multiply(raw[:, SCALE_BYTES:].view(np.int8), scales, out=matrix, casting="unsafe")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return out


def from_float32(blob: bytes) -> bytes:
    """A vector stored by schema V2–V5 (raw float32) in today's form; ``b""`` stays the empty marker."""
    import numpy as np

    return encode(np.frombuffer(blob, dtype=np.float32)) if blob else b""
