"""Multi-modal fusion: an item's modality vectors become one unit vector.

The fused space is the user space (DESIGN §6), of dimension ``D = settings.embedding_dim``.
Per item, over the modalities it has (text, image, audio, video; each with its own input
dimension ``d_m``):

    p_m  = x_m @ proj_m_w + proj_m_b                      projection to D
    w_m  = modality_weights[m] / sum over present m       normalised weights
    avg  = sum w_m * p_m                                  weighted average
    q    = avg @ q_w + q_b;  k_m = p_m @ k_w + k_b;  v_m = p_m @ v_w + v_b
    a    = softmax over present m of (q . k_m / sqrt(A))  cross-modal attention
    att  = sum a_m * v_m
    g    = sigmoid([avg, att] @ gate_w + gate_b)          gate, one per dimension
    out  = normalize(g * avg + (1 - g) * att)

As in the seed, an item without modalities gets the zero vector and an item with one gets
``normalize(p_m)``. ``fuse`` does all of it for a batch at once; a presence mask per item
lets one batch mix items with different modalities.

Weights file: a ``.npz`` (``numpy.savez``) holding these float arrays, all required:

    proj_text_w (d_text, D)   proj_text_b (D,)     and the same for image, audio, video
    modality_weights (4,)     text, image, audio, video, in that order; each > 0
    q_w (D, A)  q_b (A,)      Linear_Q on the weighted average (A: attention dimension)
    k_w (D, A)  k_b (A,)      Linear_K on each projected modality
    v_w (D, D)  v_b (D,)      Linear_V
    gate_w (2D, D)  gate_b (D,)   Linear_gate on [avg, att]

The file fixes D and each modality's input dimension. Without a file, ``default(D, dims)``
is a deterministic fusion that needs no training:

- projection: identity when ``d_m == D``; otherwise a fixed random orthogonal map (seeded by
  ``d_m`` and ``D``): an isometry when ``d_m < D``, a Johnson-Lindenstrauss projection
  scaled to keep norms on average when ``d_m > D``; biases zero.
- modality weights text 0.6, image 0.4, audio 0.3, video 0.3: titles name the product,
  images show it, sound and video describe only some items (seed: weights are learned).
- attention with ``A = D``: ``k_w = v_w = I`` and ``q_w = 5 sqrt(D) I``, so the scores are
  ``5 * cos``-like agreement with the weighted average: a modality that disagrees with
  the others counts less in ``att``.
- gate: ``gate_w = 0``, ``gate_b = ln 3``: ``g = 0.75``, the weighted average dominates and
  attention corrects it by a quarter.
"""

from __future__ import annotations

import hashlib
import math
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from origin.exceptions import FusionWeightsError

Matrix = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]

MODALITIES: tuple[str, ...] = ("text", "image", "audio", "video")
DEFAULT_MODALITY_WEIGHTS: tuple[float, ...] = (0.6, 0.4, 0.3, 0.3)
# Attention temperature of the default: scores are about this times a cosine.
DEFAULT_TEMPERATURE = 5.0
# Default gate bias: sigmoid(ln 3) = 0.75 of the weighted average.
DEFAULT_GATE_BIAS = math.log(3.0)
# Bump when ``default`` changes what it builds: it is part of the default's digest.
DEFAULT_VERSION = 1

# Rows fused per step: bounds the (rows, modalities, D) temporaries to a few MB.
CHUNK_ROWS = 4096


@dataclass(frozen=True, eq=False)
class FusionWeights:
    """The parameters of multi-modal fusion; ``digest`` identifies them (file content or
    default)."""

    projections: dict[str, tuple[Matrix, Matrix]]  # modality -> (w (d_m, D), b (D,))
    modality_weights: Matrix  # (4,), in MODALITIES order
    q_w: Matrix
    q_b: Matrix
    k_w: Matrix
    k_b: Matrix
    v_w: Matrix
    v_b: Matrix
    gate_w: Matrix
    gate_b: Matrix
    digest: str

    def __post_init__(self) -> None:
        _check_shapes(self.arrays())

    @property
    def dim(self) -> int:
        return int(self.v_w.shape[0])

    @property
    def attention_dim(self) -> int:
        return int(self.q_w.shape[1])

    @property
    def input_dims(self) -> dict[str, int]:
        return {m: int(self.projections[m][0].shape[0]) for m in MODALITIES}

    def arrays(self) -> dict[str, Matrix]:
        """Every parameter under its key in the weights file."""
        arrays: dict[str, Matrix] = {}
        for m in MODALITIES:
            w, b = self.projections[m]
            arrays[f"proj_{m}_w"], arrays[f"proj_{m}_b"] = w, b
        arrays.update(
            modality_weights=self.modality_weights,
            q_w=self.q_w,
            q_b=self.q_b,
            k_w=self.k_w,
            k_b=self.k_b,
            v_w=self.v_w,
            v_b=self.v_b,
            gate_w=self.gate_w,
            gate_b=self.gate_b,
        )
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, npt.ArrayLike], digest: str) -> FusionWeights:
        """Build from the file's keys; a missing or malformed key raises, naming it."""
        missing = [key for key in _KEYS if key not in arrays]
        if missing:
            raise FusionWeightsError(f"missing key {missing[0]!r} (all of: {', '.join(_KEYS)})")
        a: dict[str, Matrix] = {}
        for key in _KEYS:
            try:
                a[key] = np.asarray(arrays[key], dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise FusionWeightsError(f"key {key!r} is not a float array: {exc}") from exc
        _check_shapes(a)
        return cls(
            projections={m: (a[f"proj_{m}_w"], a[f"proj_{m}_b"]) for m in MODALITIES},
            modality_weights=a["modality_weights"],
            q_w=a["q_w"],
            q_b=a["q_b"],
            k_w=a["k_w"],
            k_b=a["k_b"],
            v_w=a["v_w"],
            v_b=a["v_b"],
            gate_w=a["gate_w"],
            gate_b=a["gate_b"],
            digest=digest,
        )

    @classmethod
    def load(cls, path: Path) -> FusionWeights:
        """Read a weights file; errors name the file and the offending key."""
        try:
            content = path.read_bytes()
            with np.load(path, allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
        except FileNotFoundError as exc:
            raise FusionWeightsError(f"fusion weights file {path} does not exist") from exc
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise FusionWeightsError(f"fusion weights file {path} is not a .npz: {exc}") from exc
        if not isinstance(arrays, dict):  # np.load of a plain .npy returns one array
            raise FusionWeightsError(f"fusion weights file {path} is not a .npz archive")
        try:
            return cls.from_arrays(arrays, hashlib.sha256(content).hexdigest()[:16])
        except FusionWeightsError as exc:
            raise FusionWeightsError(f"fusion weights file {path}: {exc}") from exc

    def save(self, path: Path) -> None:
        """Write the weights file (exactly at ``path``, whatever its suffix)."""
        with path.open("wb") as out:
            np.savez(out, **self.arrays())  # type: ignore[arg-type]

    @classmethod
    def default(cls, dim: int, input_dims: Mapping[str, int] | None = None) -> FusionWeights:
        """The documented untrained fusion for unified dimension ``dim``; modalities not in
        ``input_dims`` have input dimension ``dim``."""
        dims = {m: dim for m in MODALITIES}
        for m, d in (input_dims or {}).items():
            if m not in dims:
                raise FusionWeightsError(f"unknown modality {m!r}; known: {', '.join(MODALITIES)}")
            dims[m] = d
        eye = np.eye(dim, dtype=np.float32)
        zeros = np.zeros(dim, dtype=np.float32)
        described = ",".join(f"{m}={dims[m]}" for m in MODALITIES)
        material = f"fusion-default:v{DEFAULT_VERSION}:dim={dim}:{described}"
        return cls(
            projections={m: (default_projection(dims[m], dim), zeros) for m in MODALITIES},
            modality_weights=np.array(DEFAULT_MODALITY_WEIGHTS, dtype=np.float32),
            q_w=eye * np.float32(DEFAULT_TEMPERATURE * math.sqrt(dim)),
            q_b=zeros,
            k_w=eye,
            k_b=zeros,
            v_w=eye,
            v_b=zeros,
            gate_w=np.zeros((2 * dim, dim), dtype=np.float32),
            gate_b=np.full(dim, DEFAULT_GATE_BIAS, dtype=np.float32),
            digest=hashlib.sha256(material.encode()).hexdigest()[:16],
        )


_KEYS: tuple[str, ...] = (
    *(f"proj_{m}_{part}" for m in MODALITIES for part in ("w", "b")),
    "modality_weights",
    "q_w",
    "q_b",
    "k_w",
    "k_b",
    "v_w",
    "v_b",
    "gate_w",
    "gate_b",
)


def _check_shapes(a: Mapping[str, Matrix]) -> None:
    v_w = a["v_w"]
    if v_w.ndim != 2 or v_w.shape[0] != v_w.shape[1] or v_w.shape[0] < 1:
        raise FusionWeightsError(f"key 'v_w' has shape {v_w.shape}, expected (D, D)")
    dim = v_w.shape[0]
    q_w = a["q_w"]
    if q_w.ndim != 2 or q_w.shape[0] != dim or q_w.shape[1] < 1:
        raise FusionWeightsError(f"key 'q_w' has shape {q_w.shape}, expected ({dim}, A)")
    attn = q_w.shape[1]
    expected: dict[str, tuple[int | None, ...]] = {
        "modality_weights": (len(MODALITIES),),
        "q_b": (attn,),
        "k_w": (dim, attn),
        "k_b": (attn,),
        "v_b": (dim,),
        "gate_w": (2 * dim, dim),
        "gate_b": (dim,),
    }
    for m in MODALITIES:
        expected[f"proj_{m}_w"] = (None, dim)
        expected[f"proj_{m}_b"] = (dim,)
    for key, shape in expected.items():
        have = a[key].shape
        if len(have) != len(shape) or any(
            e is not None and e != h for e, h in zip(shape, have, strict=True)
        ):
            want = ", ".join("d" if e is None else str(e) for e in shape)
            want = f"({want},)" if len(shape) == 1 else f"({want})"
            raise FusionWeightsError(f"key {key!r} has shape {have}, expected {want}")
    for key in _KEYS:
        if not np.isfinite(a[key]).all():
            raise FusionWeightsError(f"key {key!r} holds NaN or infinite values")
    if (a["modality_weights"] <= 0).any():
        raise FusionWeightsError("key 'modality_weights' must be > 0 for every modality")


def default_projection(d_in: int, d_out: int) -> Matrix:
    """Identity, or a fixed random orthogonal map (seeded by the two dimensions)."""
    if d_in == d_out:
        return np.eye(d_in, dtype=np.float32)
    rng = np.random.default_rng([d_in, d_out, DEFAULT_VERSION])
    gaussian = rng.standard_normal((max(d_in, d_out), min(d_in, d_out)))
    q, r = np.linalg.qr(gaussian)
    q *= np.sign(np.diag(r))  # the unique (Haar) orthogonal factor
    if d_in < d_out:
        return np.ascontiguousarray(q.T, dtype=np.float32)  # rows orthonormal: isometry
    return (q * math.sqrt(d_in / d_out)).astype(np.float32)


def fuse(
    weights: FusionWeights,
    vectors: Mapping[str, Matrix | None],
    present: Mapping[str, Mask] | None = None,
) -> Matrix:
    """Unit fused vectors ``(n, D)`` of ``n`` items.

    ``vectors[m]`` is ``(n, d_m)`` or absent/None (no item has modality ``m``);
    ``present[m]`` (``(n,)`` booleans) says which rows of ``vectors[m]`` are real, default
    all of them. Rows that are not present are ignored whatever they hold.
    """
    given = {m: v for m, v in vectors.items() if v is not None}
    unknown = set(vectors) - set(MODALITIES)
    if unknown:
        raise ValueError(f"unknown modality {sorted(unknown)[0]!r}")
    if not given:
        raise ValueError("fuse needs at least one modality array (to know the batch size)")
    n = next(iter(given.values())).shape[0]
    dims = weights.input_dims
    mask = np.zeros((n, len(MODALITIES)), dtype=bool)
    for j, m in enumerate(MODALITIES):
        matrix = given.get(m)
        if matrix is None:
            continue
        if matrix.shape != (n, dims[m]):
            raise ValueError(f"{m} vectors have shape {matrix.shape}, expected ({n}, {dims[m]})")
        rows = present.get(m) if present is not None else None
        mask[:, j] = True if rows is None else rows
    out = np.empty((n, weights.dim), dtype=np.float32)
    for start in range(0, n, CHUNK_ROWS):
        stop = min(n, start + CHUNK_ROWS)
        chunk = {m: v[start:stop] for m, v in given.items()}
        out[start:stop] = _fuse_rows(weights, chunk, mask[start:stop])
    return out


def _fuse_rows(weights: FusionWeights, vectors: Mapping[str, Matrix], mask: Mask) -> Matrix:
    rows, dim = mask.shape[0], weights.dim
    projected = np.zeros((rows, len(MODALITIES), dim), dtype=np.float32)
    for j, m in enumerate(MODALITIES):
        matrix = vectors.get(m)
        if matrix is None or not mask[:, j].any():
            continue
        w, b = weights.projections[m]
        projected[:, j] = np.where(mask[:, j, None], matrix.astype(np.float32) @ w + b, 0.0)

    raw = mask * weights.modality_weights
    total = raw.sum(axis=1, keepdims=True)
    norm_weights = np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)
    avg = np.einsum("km,kmd->kd", norm_weights, projected, dtype=np.float32)

    query = avg @ weights.q_w + weights.q_b
    keys = projected @ weights.k_w + weights.k_b
    values = projected @ weights.v_w + weights.v_b
    scores = np.einsum("ka,kma->km", query, keys) / np.float32(math.sqrt(weights.attention_dim))
    best = np.where(mask, scores, -np.inf).max(axis=1, keepdims=True)
    best[~np.isfinite(best)] = 0.0
    exp = np.where(mask, np.exp(np.minimum(scores - best, 0.0)), 0.0)
    norm = exp.sum(axis=1, keepdims=True)
    attention = np.divide(exp, norm, out=np.zeros_like(exp), where=norm > 0)
    attended = np.einsum("km,kmd->kd", attention, values, dtype=np.float32)

    logits = np.concatenate([avg, attended], axis=1) @ weights.gate_w + weights.gate_b
    gate = 0.5 * (1.0 + np.tanh(0.5 * logits))  # sigmoid without overflow
    fused = gate * avg + (1.0 - gate) * attended

    count = mask.sum(axis=1)
    single = count == 1
    fused[single] = projected[single].sum(axis=1)  # the one present modality, projected
    fused[count == 0] = 0.0
    return unit_rows(fused)


def unit_rows(matrix: npt.NDArray[np.floating]) -> Matrix:
    """Rows scaled to length 1; zero rows stay zero."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: Matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0).astype(
        np.float32
    )
    return unit
