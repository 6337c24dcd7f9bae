"""mneme_client: mneme's SQL API as typed functions on psycopg 3, sync
(Mneme) and async (AsyncMneme), with adapters for LangGraph
(mneme_client.langgraph.MnemeStore) and the OpenAI Agents SDK
(mneme_client.agents.MnemeSession). Each method is one parameterised call
of a mneme.* function; docs/sql-api.md is the contract.

No statement is prepared (prepare_threshold=None at connect), so the
client runs behind PgBouncer in transaction pooling. With a tenant, each
call runs in a transaction that calls mneme.set_tenant first (the tenant
is transaction-local); transaction() groups calls.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import psycopg

from ._core import (SUPPORTED_API, Api, ContextItem, Conversation, ConversationMemory, HistoryEntry, Inspection,
                    Message, MnemeError, PoppedMessage, Query, Retrieval, VersionError, check_major, version_error, wrap)

__all__ = ["SUPPORTED_API", "Mneme", "AsyncMneme", "MnemeError", "VersionError", "Retrieval", "ContextItem",
           "Inspection", "HistoryEntry", "Message", "PoppedMessage", "ConversationMemory", "Conversation"]


def _not_in_tx() -> MnemeError:
    return MnemeError("set_tenant", "set_tenant outside a transaction: the tenant is transaction-local; "
                      "use transaction() or with_tenant()", "25P01", "mneme.set_tenant lasts until the end of its transaction")


class Mneme(Api):
    """mneme's SQL functions on a psycopg Connection (autocommit
    recommended: Mneme.connect opens one so)."""

    def __init__(self, conn: psycopg.Connection, tenant: Optional[str] = None, *, _in_tx: bool = False):
        self.conn, self.tenant, self._in_tx = conn, tenant, _in_tx

    @classmethod
    def connect(cls, conninfo: str, tenant: Optional[str] = None, **kwargs) -> "Mneme":
        """Opens an autocommit connection without prepared statements and
        checks the SQL API version (VersionError on a mismatch)."""
        kwargs.setdefault("prepare_threshold", None)
        kwargs.setdefault("autocommit", True)
        m = cls(psycopg.connect(conninfo, **kwargs), tenant)
        try:
            m.check_version()
        except BaseException:
            m.close()
            raise
        return m

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Mneme":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def with_tenant(self, tenant: Optional[str]) -> "Mneme":
        """A Mneme on the same connection whose calls run as tenant."""
        return Mneme(self.conn, tenant, _in_tx=self._in_tx)

    def check_version(self) -> str:
        try:
            v = self.version()
        except MnemeError as e:
            if e.sqlstate in ("42883", "3F000"):
                raise version_error("version", None, e) from e
            raise
        check_major(v)
        return v

    @contextlib.contextmanager
    def transaction(self):
        """A Mneme bound to one transaction (set_tenant first when a tenant
        is chosen); it commits at the end of the block, rolls back on an
        exception."""
        if self._in_tx:
            yield self
            return
        try:
            with self.conn.transaction():
                m = Mneme(self.conn, self.tenant, _in_tx=True)
                if self.tenant is not None:
                    m.set_tenant(self.tenant)
                yield m
        except psycopg.Error as e:
            raise wrap("transaction", e) from e

    def set_tenant(self, tenant: str) -> None:
        """mneme.set_tenant, inside transaction() only."""
        if not self._in_tx:
            raise _not_in_tx()
        self._execute(Query("set_tenant", "SELECT mneme.set_tenant(%s)", [tenant], lambda rows: None))

    def _execute(self, q: Query):
        try:
            rows = self.conn.execute(q.sql, q.params).fetchall()
        except psycopg.Error as e:
            raise wrap(q.op, e) from e
        return q.result(rows)

    def _run(self, q: Query):
        if self._in_tx or self.tenant is None:
            return self._execute(q)
        with self.transaction() as m:
            return m._execute(q)


class AsyncMneme(Api):
    """mneme's SQL functions on a psycopg AsyncConnection: every method
    returns an awaitable."""

    def __init__(self, conn: psycopg.AsyncConnection, tenant: Optional[str] = None, *, _in_tx: bool = False):
        self.conn, self.tenant, self._in_tx = conn, tenant, _in_tx

    @classmethod
    async def connect(cls, conninfo: str, tenant: Optional[str] = None, **kwargs) -> "AsyncMneme":
        kwargs.setdefault("prepare_threshold", None)
        kwargs.setdefault("autocommit", True)
        m = cls(await psycopg.AsyncConnection.connect(conninfo, **kwargs), tenant)
        try:
            await m.check_version()
        except BaseException:
            await m.close()
            raise
        return m

    async def close(self) -> None:
        await self.conn.close()

    async def __aenter__(self) -> "AsyncMneme":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def with_tenant(self, tenant: Optional[str]) -> "AsyncMneme":
        return AsyncMneme(self.conn, tenant, _in_tx=self._in_tx)

    async def check_version(self) -> str:
        try:
            v = await self.version()
        except MnemeError as e:
            if e.sqlstate in ("42883", "3F000"):
                raise version_error("version", None, e) from e
            raise
        check_major(v)
        return v

    @contextlib.asynccontextmanager
    async def transaction(self):
        if self._in_tx:
            yield self
            return
        try:
            async with self.conn.transaction():
                m = AsyncMneme(self.conn, self.tenant, _in_tx=True)
                if self.tenant is not None:
                    await m.set_tenant(self.tenant)
                yield m
        except psycopg.Error as e:
            raise wrap("transaction", e) from e

    async def set_tenant(self, tenant: str) -> None:
        if not self._in_tx:
            raise _not_in_tx()
        await self._execute(Query("set_tenant", "SELECT mneme.set_tenant(%s)", [tenant], lambda rows: None))

    async def _execute(self, q: Query):
        try:
            cur = await self.conn.execute(q.sql, q.params)
            rows = await cur.fetchall()
        except psycopg.Error as e:
            raise wrap(q.op, e) from e
        return q.result(rows)

    async def _run(self, q: Query):
        if self._in_tx or self.tenant is None:
            return await self._execute(q)
        async with self.transaction() as m:
            return await m._execute(q)
