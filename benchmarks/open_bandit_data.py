"""The Open Bandit Dataset sample (ZOZOTOWN, Apache-2.0) as the ``obp`` wheel ships it: one
log per policy (uniform random, Bernoulli Thompson sampling), 10,000 rows each, 80 items,
3 positions, logged propensities.

obp itself is not installed: 0.4.1, the newest release for Python 3.11 (0.5.x requires
Python < 3.11), imports torch at the top of ``obp.ope`` and calls ``np.int``, gone since
numpy 1.24 (the lock pins numpy 2.x). So the wheel is fetched with pip, as a file, and its
CSVs are read straight out of the zip.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

OBP_VERSION = "0.4.1"
CACHE = Path(".perso/cache/obp")
WHEEL = f"obp-{OBP_VERSION}-py3-none-any.whl"
# Inside the wheel: obp/dataset/obd/{policy}/{campaign}/{campaign}.csv.
LOG_MEMBER = "obp/dataset/obd/{policy}/all/all.csv"
# The Beta parameters of ZOZOTOWN's production BTS that obp's BernoulliTS loads with
# is_zozotown_prior=True.
PRIOR_MEMBER = "obp/policy/conf/prior_bts.yaml"
ITEMS = 80
POSITIONS = 3

IntArray = npt.NDArray[np.int64]
Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class BanditLog:
    """One policy's log, a row per impression: the item shown at a position (0-based)."""

    item: IntArray
    position: IntArray
    click: Array
    propensity: Array  # the logging policy's probability of that item at that position

    def __len__(self) -> int:
        return int(self.item.shape[0])


def wheel_path(cache: Path = CACHE) -> Path:
    """The obp wheel, downloaded into ``cache`` by pip the first time (PyPI only)."""
    path = cache / WHEEL
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", f"obp=={OBP_VERSION}"),
                *("--no-deps", "--quiet", "-d", str(cache)),
            ],
            check=True,
        )
    return path


def parse_log(text: str) -> BanditLog:
    """The columns this benchmark uses from an OBD CSV (positions there start at 1)."""
    rows = list(csv.DictReader(io.StringIO(text)))
    return BanditLog(
        item=np.array([int(r["item_id"]) for r in rows], dtype=np.int64),
        position=np.array([int(r["position"]) - 1 for r in rows], dtype=np.int64),
        click=np.array([float(r["click"]) for r in rows]),
        propensity=np.array([float(r["propensity_score"]) for r in rows]),
    )


def read_log(wheel: Path, policy: str) -> BanditLog:
    with zipfile.ZipFile(wheel) as archive:
        return parse_log(archive.read(LOG_MEMBER.format(policy=policy)).decode())


def parse_prior(text: str, campaign: str) -> tuple[Array, Array]:
    """(alpha, beta) of ``campaign`` from prior_bts.yaml, whose whole grammar is
    ``campaign:`` / ``  alpha:`` / ``    - 47.0`` (read by hand: PyYAML is no dependency
    of ours)."""
    lists: dict[tuple[str, str], list[float]] = {}
    section = key = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- "):
            lists.setdefault((section, key), []).append(float(stripped[2:]))
        elif line.startswith(" "):
            key = stripped.rstrip(":")
        else:
            section = stripped.rstrip(":")
    if (campaign, "alpha") not in lists or (campaign, "beta") not in lists:
        raise ValueError(f"no alpha and beta for campaign {campaign!r}")
    return np.array(lists[campaign, "alpha"]), np.array(lists[campaign, "beta"])


def read_prior(wheel: Path) -> tuple[Array, Array]:
    """(alpha, beta) per item of the production BTS, campaign "all"."""
    with zipfile.ZipFile(wheel) as archive:
        return parse_prior(archive.read(PRIOR_MEMBER).decode(), "all")
