"""Waiting for an object to reach a state, by watching it (tests, demo scripts, benchmarks)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import Resource
from lapilli.meta import MutableObj, resource_version


async def wait_for(
    client: KubeClient, res: Resource, name: str, namespace: str | None = None, *,
    until: Callable[[MutableObj | None], bool], timeout_s: float = 30.0,
) -> MutableObj | None:
    """Return the object once `until(obj)` holds (`obj` is None while it does not exist).

    Reads it once, then follows a watch on just that name, so no intermediate state is missed. Raises
    TimeoutError with the last state seen.
    """
    last: MutableObj | None = None

    async def follow() -> MutableObj | None:
        nonlocal last
        while True:
            try:
                last = await client.get(res, name, namespace)
                version = resource_version(last)
            except NotFound:
                last, version = None, (await client.list(res, namespace, page_size=1)).resource_version
            if until(last):
                return last
            stream = client.watch(res, namespace, resource_version=version, field_selector=f"metadata.name={name}",
                                  timeout_seconds=max(1, int(timeout_s)))
            async for event in stream:
                if event.type == "BOOKMARK":
                    continue
                last = None if event.type == "DELETED" else event.object
                if until(last):
                    return last

    try:
        async with asyncio.timeout(timeout_s):  # not wait_for: 3.11's can swallow a cancel as it times out
            return await follow()
    except TimeoutError:
        state = (last or {}).get("status") if last else "absent"
        raise TimeoutError(f"{res.kind} {namespace + '/' if namespace else ''}{name}: condition not met after "
                           f"{timeout_s:.0f}s; last status: {state}") from None
