"""How item vectors are made: the text encoder and the fusion weights that settings choose.

Every writer of the catalog (the sample generator and the ingest API) uses one
``ItemVectors``, so the text vectors and the unified vectors of one catalog come from the
same encoder and the same fusion. ``build_id`` names that pair; sample builds carry it in
their fingerprint.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import Settings
from origin.catalog.fusion import FusionWeights
from origin.catalog.text_encoder import EncoderChoice, TextEncoder, load_text_encoder
from origin.exceptions import FusionWeightsError


@dataclass(frozen=True, eq=False)
class ItemVectors:
    encoder: TextEncoder
    fusion: FusionWeights

    def __post_init__(self) -> None:
        text_dim = self.fusion.input_dims["text"]
        if text_dim != self.encoder.dim:
            raise FusionWeightsError(
                f"fusion weights take text vectors of dimension {text_dim}, the text encoder "
                f"{self.encoder.name} makes {self.encoder.dim} (PERSO_TEXT_ENCODER, "
                "PERSO_FUSION_WEIGHTS)"
            )

    @classmethod
    def default(cls, dim: int, encoder: EncoderChoice = "auto") -> ItemVectors:
        """The encoder ``encoder`` and the default fusion into dimension ``dim``."""
        text = load_text_encoder(encoder)
        return cls(text, FusionWeights.default(dim, {"text": text.dim}))

    @classmethod
    def from_settings(cls, settings: Settings) -> ItemVectors:
        """``PERSO_TEXT_ENCODER`` and ``PERSO_FUSION_WEIGHTS`` (or the default fusion)."""
        if settings.fusion_weights is None:
            return cls.default(settings.embedding_dim, settings.text_encoder)
        fusion = FusionWeights.load(settings.fusion_weights)
        if fusion.dim != settings.embedding_dim:
            raise FusionWeightsError(
                f"fusion weights file {settings.fusion_weights} fuses into dimension "
                f"{fusion.dim}, PERSO_EMBEDDING_DIM is {settings.embedding_dim}"
            )
        return cls(load_text_encoder(settings.text_encoder), fusion)

    @property
    def dim(self) -> int:
        return self.fusion.dim

    @property
    def modality_dims(self) -> dict[str, int]:
        """Input dimension of each modality (the text one is the encoder's)."""
        return self.fusion.input_dims

    @property
    def build_id(self) -> str:
        return f"{self.encoder.name}+fusion-{self.fusion.digest}"
