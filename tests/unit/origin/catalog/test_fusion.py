from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from origin.catalog.fusion import (
    DEFAULT_MODALITY_WEIGHTS,
    MODALITIES,
    FusionWeights,
    default_projection,
    fuse,
    unit_rows,
)
from origin.exceptions import FusionWeightsError

DIM = 16
DIMS = {"text": 24, "image": DIM, "audio": 8, "video": 12}


def weights() -> FusionWeights:
    return FusionWeights.default(DIM, DIMS)


def random_vectors(n: int, seed: int = 0) -> dict[str, npt.NDArray[np.float32]]:
    rng = np.random.default_rng(seed)
    return {m: unit_rows(rng.standard_normal((n, DIMS[m]))) for m in MODALITIES}


def fuse_one(w: FusionWeights, item: dict[str, npt.NDArray[np.float32]]) -> np.ndarray:
    return fuse(w, {m: v[None, :] for m, v in item.items()})[0]


@pytest.mark.parametrize(("d_in", "d_out"), [(16, 16), (8, 16), (24, 16), (384, 128), (128, 384)])
def test_default_projection_is_identity_or_norm_preserving(d_in: int, d_out: int) -> None:
    p = default_projection(d_in, d_out)
    assert p.shape == (d_in, d_out)
    assert np.array_equal(p, default_projection(d_in, d_out))  # deterministic
    if d_in == d_out:
        assert np.array_equal(p, np.eye(d_in))
    x = unit_rows(np.random.default_rng(1).standard_normal((500, d_in)))
    norms = np.linalg.norm(x @ p, axis=1)
    if d_in < d_out:  # an isometry
        assert np.allclose(norms, 1.0, atol=1e-5)
    else:  # Johnson-Lindenstrauss: lengths kept on average
        assert abs(norms.mean() - 1.0) < 0.1


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        ((), "zero"),
        (("text",), "text"),
        (("image",), "image"),
        (("audio",), "audio"),
        (("video",), "video"),
        (("text", "image"), "fused"),
        (("image", "video"), "fused"),
        (("text", "image", "audio", "video"), "fused"),
    ],
)
def test_missing_modalities(present: tuple[str, ...], expected: str) -> None:
    w = weights()
    vectors = random_vectors(1)
    mask = {m: np.array([m in present]) for m in MODALITIES}
    out = fuse(w, vectors, mask)[0]
    if expected == "zero":
        assert np.array_equal(out, np.zeros(DIM))
    elif expected in MODALITIES:  # one modality: normalize(projection)
        proj_w, proj_b = w.projections[expected]
        want = unit_rows((vectors[expected] @ proj_w + proj_b).astype(np.float64))[0]
        assert np.allclose(out, want, atol=1e-6)
    else:
        assert np.isclose(np.linalg.norm(out), 1.0, atol=1e-5)
        # what is absent does not count, whatever its rows hold
        garbage = {m: (v if m in present else np.full_like(v, np.nan)) for m, v in vectors.items()}
        assert np.allclose(fuse(w, garbage, mask)[0], out, atol=1e-6)


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        (("text", "image"), {"text": 0.6, "image": 0.4}),
        (("image", "audio"), {"image": 0.4 / 0.7, "audio": 0.3 / 0.7}),
        (("audio", "video"), {"audio": 0.5, "video": 0.5}),
        (MODALITIES, {"text": 0.3, "image": 0.2, "audio": 0.15, "video": 0.15}),
    ],
)
def test_weights_are_normalised_over_present_modalities(
    present: tuple[str, ...], expected: dict[str, float]
) -> None:
    # With the gate fully open on the weighted average, fusion is exactly that average.
    base = weights()
    arrays = {**base.arrays(), "gate_b": np.full(DIM, 50.0, np.float32)}
    w = FusionWeights.from_arrays(arrays, digest="avg-only")
    vectors = random_vectors(1, seed=3)
    mask = {m: np.array([m in present]) for m in MODALITIES}
    projected = {m: vectors[m] @ w.projections[m][0] for m in MODALITIES}
    want = sum(expected[m] * projected[m][0] for m in present)
    assert np.allclose(fuse(w, vectors, mask)[0], want / np.linalg.norm(want), atol=1e-5)
    assert DEFAULT_MODALITY_WEIGHTS == (0.6, 0.4, 0.3, 0.3)


def test_a_mixed_batch_equals_fusing_each_item_alone() -> None:
    w = weights()
    n = 40
    vectors = random_vectors(n, seed=5)
    rng = np.random.default_rng(6)
    masks = {m: rng.random(n) < 0.6 for m in MODALITIES}
    batch = fuse(w, vectors, masks)
    for row in range(n):
        item = {m: vectors[m][row] for m in MODALITIES if masks[m][row]}
        alone = fuse_one(w, item) if item else np.zeros(DIM)
        assert np.allclose(batch[row], alone, atol=1e-5), row


def test_batches_larger_than_a_chunk_are_fused_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    w = weights()
    vectors = random_vectors(50, seed=7)
    whole = fuse(w, vectors)
    monkeypatch.setattr("origin.catalog.fusion.CHUNK_ROWS", 7)
    assert np.allclose(fuse(w, vectors), whole, atol=1e-6)


@pytest.mark.parametrize("n", [1, 3, 100])
def test_output_rows_are_unit_length(n: int) -> None:
    out = fuse(weights(), random_vectors(n, seed=n))
    assert out.shape == (n, DIM)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_the_default_attention_favours_modalities_that_agree() -> None:
    w = FusionWeights.default(DIM)
    rng = np.random.default_rng(8)
    shared = unit_rows(rng.standard_normal((1, DIM)))[0]
    outlier = unit_rows(rng.standard_normal((1, DIM)))[0]
    item = {"text": shared, "image": shared, "audio": outlier}
    fused = fuse_one(w, item)
    avg_only = unit_rows(np.array([0.6 * shared + 0.4 * shared + 0.3 * outlier]))[0]
    # attention moves the result towards the two modalities that agree
    assert float(fused @ shared) > float(avg_only @ shared)


def test_load_save_round_trip(tmp_path: Path) -> None:
    w = weights()
    path = tmp_path / "fusion.weights"  # any suffix: saved exactly there
    w.save(path)
    loaded = FusionWeights.load(path)
    assert loaded.input_dims == DIMS
    assert (loaded.dim, loaded.attention_dim) == (DIM, DIM)
    for key, array in w.arrays().items():
        assert np.array_equal(loaded.arrays()[key], array), key
    vectors = random_vectors(10)
    assert np.array_equal(fuse(loaded, vectors), fuse(w, vectors))
    assert loaded.digest == FusionWeights.load(path).digest != w.digest


def test_a_trained_file_may_use_a_smaller_attention_dimension(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    arrays = weights().arrays()
    arrays.update(
        q_w=rng.standard_normal((DIM, 4)).astype(np.float32),
        q_b=np.zeros(4, np.float32),
        k_w=rng.standard_normal((DIM, 4)).astype(np.float32),
        k_b=np.zeros(4, np.float32),
    )
    np.savez(tmp_path / "small.npz", **arrays)  # type: ignore[arg-type]
    loaded = FusionWeights.load(tmp_path / "small.npz")
    assert loaded.attention_dim == 4
    out = fuse(loaded, random_vectors(5))
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def _broken(change: str) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = dict(weights().arrays())
    match change:
        case "missing q_w":
            del arrays["q_w"]
        case "proj_image_b shape":
            arrays["proj_image_b"] = np.zeros(DIM + 1)
        case "gate_w shape":
            arrays["gate_w"] = np.zeros((DIM, DIM))
        case "NaN in k_b":
            arrays["k_b"] = np.full(DIM, np.nan)
        case "zero weight":
            arrays["modality_weights"] = np.array([0.6, 0.0, 0.3, 0.3])
        case "v_w not square":
            arrays["v_w"] = np.zeros((DIM, DIM + 2))
    return arrays


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("missing q_w", "missing key 'q_w'"),
        ("proj_image_b shape", "key 'proj_image_b' has shape (17,), expected (16,)"),
        ("gate_w shape", "key 'gate_w' has shape (16, 16), expected (32, 16)"),
        ("NaN in k_b", "key 'k_b' holds NaN"),
        ("zero weight", "key 'modality_weights' must be > 0"),
        ("v_w not square", "key 'v_w' has shape (16, 18), expected (D, D)"),
    ],
)
def test_a_bad_file_is_an_error_naming_the_key(tmp_path: Path, change: str, message: str) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **_broken(change))  # type: ignore[arg-type]
    with pytest.raises(FusionWeightsError, match=r"bad\.npz") as info:
        FusionWeights.load(path)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"not a zip", "is not a .npz"), (None, "does not exist")],
)
def test_an_unreadable_file_is_a_clear_error(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "weights.npz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(FusionWeightsError, match=message):
        FusionWeights.load(path)


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        ({}, "at least one modality"),
        ({"smell": np.zeros((1, 4), np.float32)}, "unknown modality 'smell'"),
        ({"text": np.zeros((2, 23), np.float32)}, r"text vectors have shape \(2, 23\)"),
    ],
)
def test_fuse_refuses_vectors_it_cannot_use(
    vectors: dict[str, npt.NDArray[np.float32]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        fuse(weights(), vectors)
