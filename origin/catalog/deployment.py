"""Deploying a model: the next epoch, under the global deployment lock, through a fenced
pointer, announced to every region.

Model deployment holds the deployment lock, one global lock of 60 s. The lock alone would not stop a
deployer paused past its lease from writing an old epoch over a newer one, so the epoch
lives in a ``FencedPointer`` (``model:deployment``): the deployer reads it with its lease's
fencing token, which shuts out every older holder, then writes the next epoch with the same
token. The announcement (``ModelEpoch``) goes out under the lock too, so regions (and the
other origins, on the origins' stream) see epochs in the order they were written.

The pointer holds the live ranking policy beside the model (ranking policies: ``protocol.policies``,
encoded): deploying a model keeps the live policy, promoting a policy (``promote``) keeps
the live model, and each is the next epoch, announced with both. A pointer written before
policies were deployed holds none: the configured policy is live then. A roll-back is a
promotion of the older policy: the next epoch, like any other.

The critical section is one read, one write and one publish: a few milliseconds. Building
or loading the model happens before it, off the lock (the short critical section).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from coordination.exceptions import StaleFencingToken
from coordination.fencing import FencedPointer, FencedValue
from coordination.lock import Lock, RetryPolicy, locked
from protocol import keys
from protocol.policies import Policy, decode_policy, encode_policy
from redis_client.client import RedisClient
from sync.messages import ModelEpoch
from sync.publisher import SyncPublisher

DEPLOYMENT_RESOURCE = "model-deployment"
DEPLOYMENT_TTL_MS = 60_000  # the deployment lock: global, 60 s
# A deployment that finds another running waits a little, then answers 409: deployments are
# rare and an operator would rather hear "busy" than wait a minute.
DEPLOYMENT_RETRY = RetryPolicy(attempts=5, base_delay_s=0.05, max_delay_s=0.5)


@dataclass(frozen=True, slots=True)
class Deployment:
    epoch: int
    model_version: str
    fencing: int  # the deployment lock's grant that wrote it
    seq: int | None = None  # the announcement's origin sequence, once published
    policy: Policy | None = None  # the live ranking policy; None: the configured one


def encode(epoch: int, model_version: str, policy: Policy | None = None) -> bytes:
    body: dict[str, object] = {"epoch": epoch, "model_version": model_version}
    if policy is not None:
        body["policy"] = encode_policy(policy).decode()
    return json.dumps(body).encode()


def decode(stored: FencedValue | None) -> Deployment | None:
    """The deployment a pointer holds; None when nothing was ever deployed."""
    if stored is None:
        return None
    body = json.loads(stored.value)
    policy = body.get("policy")
    return Deployment(
        int(body["epoch"]),
        str(body["model_version"]),
        stored.fencing,
        policy=decode_policy(policy) if policy is not None else None,
    )


class ModelDeployments:
    def __init__(self, pointer: FencedPointer, lock: Lock, publisher: SyncPublisher) -> None:
        self._pointer = pointer
        self._lock = lock
        self._publisher = publisher

    @classmethod
    def over(cls, redis: RedisClient, lock: Lock, publisher: SyncPublisher) -> ModelDeployments:
        return cls(FencedPointer(redis, keys.MODEL_DEPLOYMENT), lock, publisher)

    async def current(self) -> Deployment | None:
        return decode(await self._pointer.read())

    async def deploy(self, model_version: str) -> Deployment:
        """Make ``model_version`` live as the next epoch, the live policy kept. Raises
        ``LockNotAcquired`` when another deployment holds the lock, ``StaleFencingToken``
        when this one's lease lapsed and a newer deployment used the pointer,
        ``PublishFailed`` when the epoch was written but not announced (edges then catch up
        at the next announcement)."""
        deployed, _ = await self._next(
            lambda previous: (model_version, previous.policy if previous else None)
        )
        return deployed

    async def promote(
        self, policy: Policy, *, model_version: str
    ) -> tuple[Deployment, Deployment | None]:
        """Make ``policy`` the live ranking policy as the next epoch, the live model kept
        (``model_version`` when none was ever deployed); and the deployment it replaced
        (None: nothing was deployed). Raises as ``deploy``."""
        return await self._next(
            lambda previous: (previous.model_version if previous else model_version, policy)
        )

    async def _next(
        self, change: Callable[[Deployment | None], tuple[str, Policy | None]]
    ) -> tuple[Deployment, Deployment | None]:
        """The next epoch, its model version and policy ``change`` of the live deployment,
        written and announced under the lock; and the deployment it replaced."""
        async with locked(
            self._lock, DEPLOYMENT_RESOURCE, DEPLOYMENT_TTL_MS, retry=DEPLOYMENT_RETRY
        ) as lease:
            previous = decode(await self._pointer.read_as(lease.fencing))
            epoch = (previous.epoch if previous else 0) + 1
            model_version, policy = change(previous)
            if not await self._pointer.write(encode(epoch, model_version, policy), lease.fencing):
                raise StaleFencingToken(keys.MODEL_DEPLOYMENT, lease.fencing)
            announced = ModelEpoch(
                epoch, model_version, encode_policy(policy) if policy is not None else None
            )
            # Every region's edges, and every origin (``origin.control``).
            [seq] = await self._publisher.publish([announced], origins=True)
        return Deployment(epoch, model_version, lease.fencing, seq, policy), previous
