"""MnemeStore: LangGraph's BaseStore over mneme.

Namespaces are (tenant, conversation uuid) or (tenant, conversation uuid,
label); a key is a memory's title (or its id, for memories without one).
put is mneme.remember (superseding the key's current memory), delete is
mneme.forget (or mneme.erase with delete_mode="erase"), search with a
query is mneme.search. docs/clients.md explains the mapping.

With langgraph installed, MnemeStore subclasses langgraph.store.base.
BaseStore and returns its Item and SearchItem. Without it (Debian has no
langgraph package), the same methods come from a small base with the
same signatures, and the operations are recognised by their fields, so
langgraph's GetOp, SearchOp, PutOp and ListNamespacesOp work either way.
"""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, NamedTuple, Optional

from . import Mneme, MnemeError

try:  # pragma: no cover - exercised only where langgraph is installed
    from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchItem, SearchOp
    HAVE_LANGGRAPH = True
except ImportError:
    HAVE_LANGGRAPH = False

    class GetOp(NamedTuple):
        namespace: tuple
        key: str
        refresh_ttl: bool = True

    class SearchOp(NamedTuple):
        namespace_prefix: tuple
        filter: Optional[dict] = None
        limit: int = 10
        offset: int = 0
        query: Optional[str] = None
        refresh_ttl: bool = True

    class PutOp(NamedTuple):
        namespace: tuple
        key: str
        value: Optional[dict]
        index: Any = None
        ttl: Any = None

    class MatchCondition(NamedTuple):
        match_type: str  # "prefix" or "suffix"
        path: tuple

    class ListNamespacesOp(NamedTuple):
        match_conditions: Optional[tuple] = None
        max_depth: Optional[int] = None
        limit: int = 100
        offset: int = 0

    @dataclass
    class Item:
        value: dict
        key: str
        namespace: tuple
        created_at: datetime
        updated_at: datetime

        def dict(self) -> dict:
            return {"value": self.value, "key": self.key, "namespace": list(self.namespace),
                    "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}

    @dataclass
    class SearchItem(Item):
        score: Optional[float] = None

    class BaseStore:
        """langgraph.store.base.BaseStore's methods, each one operation of
        batch / abatch."""

        def batch(self, ops: Iterable) -> list:
            raise NotImplementedError

        async def abatch(self, ops: Iterable) -> list:
            raise NotImplementedError

        def get(self, namespace: tuple, key: str, *, refresh_ttl: Optional[bool] = None):
            return self.batch([GetOp(tuple(namespace), str(key), refresh_ttl is not False)])[0]

        def search(self, namespace_prefix: tuple, /, *, query: Optional[str] = None, filter: Optional[dict] = None,
                   limit: int = 10, offset: int = 0, refresh_ttl: Optional[bool] = None) -> list:
            return self.batch([SearchOp(tuple(namespace_prefix), filter, limit, offset, query, refresh_ttl is not False)])[0]

        def put(self, namespace: tuple, key: str, value: dict, index: Any = None, *, ttl: Any = None) -> None:
            self.batch([PutOp(tuple(namespace), str(key), value, index, ttl)])

        def delete(self, namespace: tuple, key: str) -> None:
            self.batch([PutOp(tuple(namespace), str(key), None)])

        def list_namespaces(self, *, prefix: Optional[tuple] = None, suffix: Optional[tuple] = None,
                            max_depth: Optional[int] = None, limit: int = 100, offset: int = 0) -> list:
            return self.batch([ListNamespacesOp(_conditions(prefix, suffix), max_depth, limit, offset)])[0]

        async def aget(self, namespace: tuple, key: str, *, refresh_ttl: Optional[bool] = None):
            return (await self.abatch([GetOp(tuple(namespace), str(key), refresh_ttl is not False)]))[0]

        async def asearch(self, namespace_prefix: tuple, /, *, query: Optional[str] = None, filter: Optional[dict] = None,
                          limit: int = 10, offset: int = 0, refresh_ttl: Optional[bool] = None) -> list:
            return (await self.abatch([SearchOp(tuple(namespace_prefix), filter, limit, offset, query, refresh_ttl is not False)]))[0]

        async def aput(self, namespace: tuple, key: str, value: dict, index: Any = None, *, ttl: Any = None) -> None:
            await self.abatch([PutOp(tuple(namespace), str(key), value, index, ttl)])

        async def adelete(self, namespace: tuple, key: str) -> None:
            await self.abatch([PutOp(tuple(namespace), str(key), None)])

        async def alist_namespaces(self, *, prefix: Optional[tuple] = None, suffix: Optional[tuple] = None,
                                   max_depth: Optional[int] = None, limit: int = 100, offset: int = 0) -> list:
            return (await self.abatch([ListNamespacesOp(_conditions(prefix, suffix), max_depth, limit, offset)]))[0]


def _conditions(prefix, suffix) -> tuple:
    out = []
    if prefix:
        out.append(MatchCondition("prefix", tuple(prefix)))
    if suffix:
        out.append(MatchCondition("suffix", tuple(suffix)))
    return tuple(out)


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def _parse(ns, what: str):
    ns = tuple(ns)
    if not 2 <= len(ns) <= 3 or not _UUID.match(str(ns[1])):
        raise MnemeError(what, f"a namespace is (tenant, conversation uuid) or (tenant, conversation uuid, label), got {ns!r}",
                         "22023", 'docs/clients.md, "LangGraph": namespaces map to tenants, conversations and labels')
    return ns[0], ns[1], ns[2] if len(ns) == 3 else None


def _encode(value: dict) -> str:
    """{"content": "text"} is stored as the text, any other value as its JSON."""
    if set(value) == {"content"} and isinstance(value["content"], str):
        return value["content"]
    return json.dumps(value, sort_keys=True)


def _decode(content: str) -> dict:
    if content.startswith("{"):
        try:
            v = json.loads(content)
            if isinstance(v, dict):
                return v
        except ValueError:
            pass
    return {"content": content}


def _path_matches(ns: tuple, path: tuple, suffix: bool) -> bool:
    if len(path) > len(ns):
        return False
    part = ns[len(ns) - len(path):] if suffix else ns[:len(path)]
    return all(p == "*" or p == q for p, q in zip(path, part))


class MnemeStore(BaseStore):
    """A LangGraph store over mneme on a psycopg connection (autocommit,
    prepare_threshold=None: Mneme.connect(...).conn is one)."""

    def __init__(self, conn, *, tenant: str = "default", delete_mode: str = "forget",
                 reason: str = "deleted through the LangGraph store"):
        if delete_mode not in ("forget", "erase"):
            raise ValueError("delete_mode is 'forget' or 'erase'")
        self.conn, self.tenant, self.erase, self.reason = conn, tenant, delete_mode == "erase", reason

    def _mneme(self, tenant) -> Mneme:
        return Mneme(self.conn, tenant)

    def batch(self, ops: Iterable) -> list:
        out = []
        for op in ops:
            if hasattr(op, "namespace_prefix"):
                out.append(self._search(op))
            elif hasattr(op, "value"):
                out.append(self._put(op))
            elif hasattr(op, "key"):
                out.append(self._get(op))
            else:
                out.append(self._list(op))
        return out

    async def abatch(self, ops: Iterable) -> list:
        # One connection: the sync batch in a worker thread, as langgraph's
        # own sync-connection stores do.
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def _find(self, m: Mneme, conv, key: str, label):
        hits = [x for x in m.memories(conv)
                if x.status == "active" and (x.title == key or str(x.memory_id) == key) and (not label or x.label == label)]
        return max(hits, key=lambda x: x.created_at, default=None)

    @staticmethod
    def _item(ns: tuple, mem, score=None):
        key = mem.title if mem.title is not None else str(mem.memory_id)
        if score is None:
            return Item(value=_decode(mem.content), key=key, namespace=ns, created_at=mem.created_at, updated_at=mem.created_at)
        return SearchItem(value=_decode(mem.content), key=key, namespace=ns, created_at=mem.created_at,
                          updated_at=mem.created_at, score=score)

    def _get(self, op):
        tenant, conv, label = _parse(op.namespace, "get")
        mem = self._find(self._mneme(tenant), conv, op.key, label)
        return self._item(tuple(op.namespace), mem) if mem else None

    def _put(self, op) -> None:
        tenant, conv, label = _parse(op.namespace, "delete" if op.value is None else "put")
        with self._mneme(tenant).transaction() as m:
            old = self._find(m, conv, op.key, label)
            if op.value is None:
                if old is not None:
                    (m.erase if self.erase else m.forget)(old.memory_id, self.reason)
                return
            content = _encode(op.value)
            if old is not None and old.content == content:
                return
            m.remember(conv, content, label=label, title=op.key, supersedes=old.memory_id if old else None)

    def _search(self, op) -> list:
        tenant, conv, label = _parse(op.namespace_prefix, "search")
        m = self._mneme(tenant)
        ns = tuple(op.namespace_prefix)[:3]
        flt = op.filter or {}
        keep = lambda it: all(it.value.get(k) == v for k, v in flt.items())  # noqa: E731
        if op.query:
            k = min(100, op.limit + op.offset + (50 if label or flt else 0))
            hits = [h for h in m.search(conv, op.query, k) if not label or h.label == label]
            items = [self._item(ns, h, h.score) for h in hits]
        else:
            mems = sorted((x for x in m.memories(conv) if x.status == "active" and (not label or x.label == label)),
                          key=lambda x: x.created_at, reverse=True)
            items = [self._item(ns, x, 0.0) for x in mems]
        return [it for it in items if keep(it)][op.offset:op.offset + op.limit]

    def _list(self, op) -> list:
        conds = tuple(op.match_conditions or ())
        named = next((c for c in conds if c.match_type == "prefix" and c.path and c.path[0] != "*"), None)
        tenant = named.path[0] if named else self.tenant
        m = self._mneme(tenant)
        seen, out = set(), []

        def add(ns):
            ns = ns if op.max_depth is None else ns[:op.max_depth]
            if ns not in seen:
                seen.add(ns)
                out.append(ns)
        for c in m.conversations(10000):
            conv = str(c.conversation_id)
            add((tenant, conv))
            if op.max_depth is None or op.max_depth >= 3:
                for label in sorted({x.label for x in m.memories(c.conversation_id) if x.status == "active"}):
                    add((tenant, conv, label))
        out = [ns for ns in out if all(_path_matches(ns, tuple(c.path), c.match_type == "suffix") for c in conds)]
        return out[op.offset:op.offset + op.limit]
