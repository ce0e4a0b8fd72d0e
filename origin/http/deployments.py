"""How a deployment's failures answer (``origin.catalog.deployment``): one table for every
route that writes the deployment pointer (a model epoch, a policy promotion)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import RedisError

from coordination.exceptions import LockNotAcquired, StaleFencingToken
from protocol.exceptions import ApiError
from sync.exceptions import PublishFailed


@contextmanager
def deployment_errors() -> Iterator[None]:
    """A deployment already running: 409, nothing written. This one's lease lapsed and a
    newer one wrote the pointer: 409, nothing written. Written but not announced to every
    region: 503 (regions catch up at the next announcement; a retry announces again)."""
    try:
        yield
    except LockNotAcquired as exc:
        raise ApiError(
            409, "conflict", "another model deployment is in progress", retry_after_s=1
        ) from exc
    except StaleFencingToken as exc:
        raise ApiError(
            409, "conflict", "a newer deployment overtook this one; nothing written"
        ) from exc
    except (RedisError, PublishFailed) as exc:
        raise ApiError(
            503, "unavailable", f"not announced to every region: {exc}", retry_after_s=1
        ) from exc
