"""The configuration page's notes on the model, the catalog and ranking: retrieval,
Thompson sampling, the rules, policies, the origin's limits and catalog replicas.

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

RANKING_NOTES: dict[str, Note] = {
    "PERSO_EMBEDDING_DIM": Note("all", "dimension of the one vector space (fused items and users)"),
    "PERSO_MODEL_VERSION": Note(
        "origin",
        "the model version answers, pools and decisions carry (`metadata.model_version`) until "
        "a model epoch deploys another",
    ),
    "PERSO_CATALOG": Note(
        "up, demo",
        "what the catalog starts from: `sample` (generated), `empty` (items only through the "
        "admin API), or the path of a JSON-lines file of items; with `empty` or a file, sample "
        "items of an earlier run are deleted at start. `--catalog` sets it; `perso demo` "
        "refuses `empty`",
    ),
    "PERSO_CATALOG_SIZE": Note(
        "up, demo, ingest", "sample catalog size (100 to 1,000,000); sizes the sample only"
    ),
    "PERSO_CATALOG_SEED": Note("up, demo, ingest", "sample catalog seed"),
    "PERSO_FUSION_WEIGHTS": Note(
        "up, origin, ingest",
        "multi-modal fusion weights file (`.npz`, keys in docs/catalog.md); unset: the documented "
        "untrained default",
    ),
    "PERSO_TEXT_ENCODER": Note(
        "up, origin, ingest",
        "title vectors: `minilm` (all-MiniLM-L6-v2 int8 ONNX, 384-d), `hashing` (feature "
        "hashing, 512-d), `auto` = minilm when installed",
    ),
    "PERSO_RANKING_CANDIDATES": Note(
        "origin", "candidates retrieved per request before the bandit and re-ranking"
    ),
    "PERSO_POOL_SIZE": Note(
        "origin",
        "candidates in a pool an edge asks for (`POST /v1/internal/pools`, 1 to 5000): the best by"
        " optimistic score (mean + 2 sd), the answer's items always among them",
    ),
    "PERSO_EXPLORATION_WEIGHT": Note(
        "origin, edge",
        "the exploration when the request gives no `exploration_rate`: the draws' spread is "
        "this / 0.3 of the posteriors' (0.3: plain Thompson sampling; 0: the posterior means; "
        "up to 1: wider)",
    ),
    "PERSO_DIVERSITY_WEIGHT": Note(
        "origin, edge",
        "relevance-weighted diversity (MMR) when the request gives no `diversity_weight`: a "
        "candidate loses this times its largest cosine similarity to the items already chosen",
    ),
    "PERSO_EMOTION_RULES": Note(
        "origin", "apply the emotion rules (emotion-aware re-ranking) as bounded score shifts"
    ),
    "PERSO_VALUE_WEIGHT": Note(
        "origin, edge",
        "the graded reward's weight in ranking (0 to 4): 1 ranks by expected value (engagement "
        "rate times what an engagement is worth), 0 by engagement alone",
    ),
    "PERSO_PROPENSITY_DRAWS": Note(
        "origin, edge",
        "re-sampled runs of the policy that estimate each shown item's propensity (0: none, "
        "propensity 1)",
    ),
    "PERSO_BANDIT_DECAY_HALF_LIFE_S": Note(
        "origin, worker", "item posteriors decay toward the prior with this half-life (0 disables)"
    ),
    "PERSO_USER_PRIOR_SCALE": Note(
        "worker, origin, edge",
        "the configured prior of the users' models: variance `scale / dim` per dimension (sd of"
        " a score 0.5 at dim 128); models are stored as learnt under it and used under the "
        "population prior once there is one; a promoted policy may scale the prior's spread",
    ),
    "PERSO_POPULATION_EVERY_S": Note(
        "worker",
        "how often the elected worker re-estimates the users' population prior (their mean "
        "taste and its spread, `relevance/population.py`) from the users it updated lately; 0: "
        "never, users are learnt and ranked under `PERSO_USER_PRIOR_SCALE`'s prior",
    ),
    "PERSO_POPULATION_RANK": Note(
        "worker",
        "how many directions in which users' tastes co-vary the population prior keeps (0 to 64; "
        "its covariance v I + U diag(λ) Uᵀ, estimated by EM as probabilistic PCA over the "
        "users' evidence): a user's click then moves them along those directions too, at the "
        "origin and at the edge (`relevance/population.py`'s `for_ranking`); 0: the same spread"
        " in every direction (rank 20: 5.7 points worse in median final-tenth regret on the "
        "family at seed 1, even at seed 2, better in the subtle shop only: see [the learning "
        "loop](architecture/learning-loop.md))",
    ),
    "PERSO_USER_DRIFT_HALF_LIFE_S": Note(
        "worker", "an idle user's certainty fades halfway back to the prior in this time"
    ),
    "PERSO_POLICY_VERSION": Note(
        "origin, edge",
        "the version of the `configured` policy (the four settings above as a "
        "[policy](architecture/policies-evaluation.md)), live until one is promoted",
    ),
    "PERSO_POLICY_POLL_S": Note(
        "origin",
        "how often an origin reads the deployment pointer: a safety net, since a promotion on "
        "another origin arrives through the origins' stream; the poll catches one whose "
        "announcement failed (a failed read keeps the live one)",
    ),
    "PERSO_CONTEXT_LOG_RATE": Note(
        "origin, edge",
        "the share of the decisions the origin (and an edge ranking its users itself) ranks "
        "whose context goes to the [context "
        "log](architecture/learning-loop.md#the-context-log-and-the-shadow-log) "
        "(`contexts:{p}`, about 5 KB each): what `perso evaluate` can estimate candidates on",
    ),
    "PERSO_SHADOW_POLICY": Note(
        "origin, edge",
        "a candidate run beside the live policy in [shadow "
        "mode](architecture/policies-evaluation.md#offline-evaluation): a registered policy "
        "(`name`, `name@version`; origins only), `random`, `popular`, or one written inline "
        "(`explore-low:exploration_weight=0.05`); unknown or malformed: the process refuses to "
        "start",
    ),
    "PERSO_SHADOW_RATE": Note(
        "origin, edge",
        "the share of the live decisions the shadow policy runs on (each replays both policies "
        "in a background thread: about 10 ms of CPU)",
    ),
    "PERSO_ORIGIN_MAX_INFLIGHT": Note(
        "origin",
        "requests in flight beyond which personalize answers popular items and feedback 429",
    ),
    "PERSO_ORIGIN_MAX_BODY_BYTES": Note(
        "origin",
        "larger request bodies get 413 (the largest valid API request, 500 excluded ids or 100 "
        "feedback items, is under 100 KB)",
    ),
    "PERSO_ORIGIN_MAX_INGEST_BODY_BYTES": Note(
        "origin",
        "the limit of `POST /v1/admin/catalog/items` instead (1,000 items with four "
        "1,024-number vectors are about 40 MB of JSON)",
    ),
    "PERSO_CATALOG_ORIGIN_URL": Note(
        "origin",
        "makes this origin a [catalog replica](running/several-origins.md) of the origin at "
        "this URL (`http://` or `https://`): no vector store, its index loaded from that origin"
        " and kept in step, catalog writes a 409 naming it; unset: the origin opens the vector "
        "store itself. Qdrant local mode only: with `QDRANT_URL` as well, the origin refuses to"
        " start",
        default="`perso up --origins N`: origin 0, for the others",
    ),
    "PERSO_CATALOG_ORIGIN_WAIT_S": Note(
        "origin",
        "how long a starting catalog replica keeps asking the catalog origin for its catalog "
        "(back-off 0.1 s doubling to 2 s) before it gives up and exits",
    ),
}
