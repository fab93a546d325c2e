"""The one small async client every write goes through, and the raw request primitives reads use.

Raw JSON over aiohttp with orjson: objects stay plain dicts (kubernetes_asyncio models cost 30-60x more to
build, see STYLE.md). Errors surface as `lapilli.kube.errors` classes. One `aiohttp.ClientSession` per
client; open it with `async with KubeClient(config)` or `KubeClient.from_kubeconfig(path)`.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import aiohttp
import orjson

from lapilli.kube.config import ConfigError, KubeConfig, load_config
from lapilli.kube.errors import ApiError, Fenced, Gone, NotFound, error_from_response
from lapilli.kube.resources import PODS, Resource
from lapilli.kube.watch import LineSplitter, WatchEvent, decode_event
from lapilli.meta import meta, name_of, namespace_of

PatchType = Literal["merge", "strategic", "json", "apply"]
PATCH_CONTENT_TYPES: Final[dict[str, str]] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",  # JSON is valid YAML
}
_JSON: Final = "application/json"
_READS: Final = frozenset({"GET", "HEAD"})
Params = Mapping[str, str | int | bool | None]
# What one request through a KubeClient raises other than by a bug: the API server's refusal (`ApiError`), a
# connection refused or dropped, a timeout, and a credential source that failed (an exec plugin, a token file).
# Callers that answer or retry such a failure catch these, not a list of their own.
REQUEST_ERRORS: Final = (ApiError, aiohttp.ClientError, OSError, TimeoutError, ConfigError)


@dataclass(frozen=True, slots=True)
class ObjectList:
    """The items of a (fully paged) list and the resourceVersion to start a watch from."""

    items: list[dict[str, Any]]
    resource_version: str


def _clean(params: Params | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def env_proxy(server: str) -> str | None:
    """The proxy HTTPS_PROXY / HTTP_PROXY (and NO_PROXY) name for `server`, as the environment says now."""
    url = urllib.parse.urlsplit(server)
    if not url.hostname or urllib.request.proxy_bypass(url.hostname):
        return None
    return urllib.request.getproxies().get(url.scheme) or None


class KubeClient:
    """Async client for one API server. Methods take a `Resource` plus names; bodies are plain dicts."""

    def __init__(self, config: KubeConfig, *, max_connections: int = 100, request_timeout_s: float = 60.0) -> None:
        self.config = config
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._env_proxy: str | None = None  # set with the session (_http)
        self._eviction_version: str | None = None

    @classmethod
    def from_kubeconfig(cls, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> KubeClient:
        return cls(load_config(path), **kwargs)

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def fenced(self, allowed: Callable[[], bool], why: str) -> KubeClient:
        """A client on this one's connections whose writes raise `Fenced` (`why`) while `allowed()` is false;
        reads and watches pass. Work guarded by a Lease writes through one, so a replica that lost the Lease
        cannot write on from a task that has not been stopped yet."""
        return _FencedClient(self, allowed, why)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Accept": _JSON, "User-Agent": "lapilli"}
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=self.config.ssl_context())
            self._session = aiohttp.ClientSession(
                self.config.server, headers=headers, connector=connector, timeout=self._timeout,
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
            # kubectl honours HTTPS_PROXY/NO_PROXY for what a kubeconfig names, unless it names a proxy-url. Read
            # once here: aiohttp's trust_env reads the environment and ~/.netrc again in a worker thread for every
            # request, two thread hops per API call (~5 % of the service's CPU per plain pod, py-spy).
            self._env_proxy = (env_proxy(self.config.server)
                               if self.config.source is not None and self.config.proxy is None else None)
        return self._session

    async def _auth(self, content_type: str | None, *, renew: bool = False) -> dict[str, str]:
        """Headers of one request: the credentials (refreshed when due, or at once when `renew`) and its type."""
        limit = self._timeout.total
        try:
            # The request timeout bounds the credentials too: an exec plugin that never returns (one waiting for an
            # interactive login) must not hold a request forever.
            async with asyncio.timeout(limit):
                await self.config.prepare()
                authorization = await self.config.authorization(force=renew)
        except TimeoutError:
            raise ConfigError(f"the kubeconfig's credential source (an exec plugin, a token refresh) gave none within "
                              f"{limit:g}s") from None
        headers: dict[str, str] = {}
        if authorization:
            headers["Authorization"] = authorization
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _route(self) -> dict[str, Any]:
        """Per-request connection options from the kubeconfig: `proxy-url` and `tls-server-name`."""
        route: dict[str, Any] = {}
        if self.config.proxy or self._env_proxy:
            route["proxy"] = self.config.proxy or self._env_proxy
        if self.config.tls_server_name:
            route["server_hostname"] = self.config.tls_server_name
        return route

    # -- raw primitives ------------------------------------------------------------------------------------

    async def request(
        self, method: str, path: str, *, params: Params | None = None, body: Any = None,
        content_type: str = _JSON,
    ) -> dict[str, Any]:
        """Send one request; return the decoded JSON body or raise the matching `ApiError`."""
        data = None if body is None else orjson.dumps(body)
        renew = False
        while True:
            headers = await self._auth(content_type if data is not None else None, renew=renew)
            async with self._http().request(
                method, path, params=_clean(params), data=data, headers=headers, **self._route()
            ) as resp:
                raw = await resp.read()
                status = resp.status
            if status == 401 and not renew and self.config.source is not None:
                renew = True  # expired or rotated credentials: ask their source once more, then try again
                continue
            if status >= 400:
                raise error_from_response(status, raw)
            break
        decoded: dict[str, Any] = orjson.loads(raw) if raw else {}  # Kubernetes answers objects (or Status)
        return decoded

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self.request("GET", res.path(namespace, name))

    async def list(
        self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
        field_selector: str | None = None, page_size: int = 500,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> ObjectList:
        """List every object, following `continue` tokens; an expired token restarts as one unpaged list.
        `transform` slims each item as its page arrives (a Reflector's): what it drops is never held for the
        whole list at once."""
        items: list[dict[str, Any]] = []
        params: dict[str, str | int | None] = {
            "labelSelector": label_selector, "fieldSelector": field_selector, "limit": page_size or None,
        }
        cont: str | None = None
        while True:
            try:
                page = await self.request("GET", res.path(namespace), params={**params, "continue": cont})
            except Gone:
                if cont is None:
                    raise
                # The snapshot behind the token was compacted; client-go's pager falls back the same way.
                items, cont, params["limit"] = [], None, None
                continue
            for item in page.get("items") or ():  # list items carry no kind; callers hand these to code expecting it
                item.setdefault("kind", res.kind)
                item.setdefault("apiVersion", res.api_version)
                items.append(item if transform is None else transform(item))
            list_meta = meta(page)
            cont = list_meta.get("continue") or None
            if cont is None:
                return ObjectList(items, str(list_meta.get("resourceVersion", "")))

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None, *, dry_run: bool = False,
    ) -> dict[str, Any]:
        """POST `obj`; with `dry_run` the server admits and validates it (webhooks included) and stores nothing."""
        ns = namespace or namespace_of(obj)
        params = {"dryRun": "All"} if dry_run else None
        return await self.request("POST", res.path(ns if res.namespaced else None), params=params, body=obj)

    async def replace(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or namespace_of(obj)
        return await self.request("PUT", res.path(ns if res.namespaced else None, name_of(obj)), body=obj)

    async def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
        patch_type: PatchType = "merge", subresource: str | None = None, field_manager: str | None = None,
        force: bool | None = None,
    ) -> dict[str, Any]:
        """PATCH an object (or a subresource). `patch_type="apply"` is server-side apply (needs field_manager)."""
        params = {"fieldManager": field_manager, "force": force}
        return await self.request(
            "PATCH", res.path(namespace, name, subresource), params=params, body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )

    async def patch_status(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
        patch_type: PatchType = "merge",
    ) -> dict[str, Any]:
        return await self.patch(res, name, patch, namespace, patch_type=patch_type, subresource="status")

    async def delete(
        self, res: Resource, name: str, namespace: str | None = None, *, grace_period_seconds: int | None = None,
        propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None,
        uid: str | None = None, resource_version: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with DeleteOptions; `uid`/`resource_version` become preconditions (409 Conflict if stale)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            options["preconditions"] = preconditions
        return await self.request("DELETE", res.path(namespace, name), body=options)

    # -- pod verbs the scheduler side needs --------------------------------------------------------------

    async def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
                   annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """POST pods/{name}/binding: the answer is a `Status`. With `uid` a recreated namesake is not bound;
        `annotations` are merged into the pod's by the API server together with the node (every version Lapilli
        supports does: `BindingREST.setPodHostAndAnnotations`)."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:
            metadata["annotations"] = dict(annotations)
        binding = {
            "apiVersion": "v1", "kind": "Binding", "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return await self.request("POST", PODS.path(namespace, name, "binding"), body=binding)

    async def evict(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None,
    ) -> dict[str, Any]:
        """Evict through the Eviction API (PodDisruptionBudgets apply; 429 when a budget forbids it)."""
        options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}
        version = await self._eviction_api()
        eviction = {
            "apiVersion": version, "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": options or None,
        }
        return await self.request("POST", PODS.path(namespace, name, "eviction"), body=eviction)

    async def _eviction_api(self) -> str:
        # policy/v1 Eviction arrived in 1.22; 1.20 only serves policy/v1beta1. Ask discovery once.
        if self._eviction_version is None:
            v1 = await self.group_version_served("policy/v1")
            self._eviction_version = "policy/v1" if v1 else "policy/v1beta1"
        return self._eviction_version

    # -- discovery --------------------------------------------------------------------------------------

    async def server_version(self) -> tuple[int, int]:
        """(major, minor) of the API server; minors such as "20+" are read as 20."""
        info = await self.request("GET", "/version")
        minor = "".join(ch for ch in str(info.get("minor", "0")) if ch.isdigit())
        return int(info.get("major", "1")), int(minor or 0)

    async def group_version_served(self, group_version: str) -> bool:
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        try:
            await self.request("GET", path)
        except NotFound:
            return False
        return True

    # -- watch ------------------------------------------------------------------------------------------

    async def watch(
        self, res: Resource, namespace: str | None = None, *, resource_version: str | None = None,
        timeout_seconds: int = 300, allow_bookmarks: bool = True, label_selector: str | None = None,
        field_selector: str | None = None, on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Yield decoded events until the server closes the stream (after `timeout_seconds`). `on_open` is called
        once the server has accepted the watch (a reflector resets its back-off there).

        Raises `Gone` when `resource_version` is too old (as an HTTP 410 or an ERROR event), `ApiError` for
        other refusals and aiohttp errors when the connection breaks; a reflector decides what to do next.
        """
        params = {
            "watch": True, "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": allow_bookmarks, "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        # No total deadline on a stream; a silent connection is declared dead a while after the server's own.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30)
        renew = False
        while True:
            headers = await self._auth(None, renew=renew)
            async with self._http().get(
                res.path(namespace), params=_clean(params), headers=headers, timeout=timeout, **self._route(),
            ) as resp:
                if resp.status == 401 and not renew and self.config.source is not None:
                    renew = True  # as `request` does: ask the credential source once more, then watch again
                    continue
                if resp.status >= 400:
                    raise error_from_response(resp.status, await resp.read())
                if on_open is not None:
                    on_open()
                splitter = LineSplitter()
                async for chunk in resp.content.iter_any():
                    for line in splitter.feed(chunk):
                        yield decode_event(line)
                return


class _FencedClient(KubeClient):
    """See `KubeClient.fenced`. Closing it leaves the connections to the client it came from."""

    def __init__(self, base: KubeClient, allowed: Callable[[], bool], why: str) -> None:
        super().__init__(base.config)
        self._base, self._allowed, self._why = base, allowed, why

    def _http(self) -> aiohttp.ClientSession:
        return self._base._http()

    async def close(self) -> None:
        return None

    async def request(
        self, method: str, path: str, *, params: Params | None = None, body: Any = None,
        content_type: str = _JSON,
    ) -> dict[str, Any]:
        if method not in _READS and not self._allowed():
            raise Fenced(f"{method} {path} refused: {self._why}")
        return await super().request(method, path, params=params, body=body, content_type=content_type)
