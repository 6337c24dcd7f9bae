"""The SQL API's calls, shared by Mneme (sync) and AsyncMneme: each is one
parameterised call of a mneme.* function with its row mapping."""
from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import psycopg

#: The mneme SQL API versions (mneme.version()) this package supports.
SUPPORTED_API = ">=1.0.0 <2.0.0"
_SUPPORTED_MAJOR = 1


class MnemeError(Exception):
    """A mneme (or PostgreSQL) error of one call: its SQLSTATE (22004 a
    NULL, 22023 a bad value, 42501 not allowed, P0002 no such memory:
    docs/sql-api.md, "Errors"), message and HINT. The psycopg error is its
    __cause__."""

    def __init__(self, op: str, message: str, sqlstate: Optional[str] = None,
                 hint: Optional[str] = None, detail: Optional[str] = None):
        text = f"{op}: {message}" + (f" (SQLSTATE {sqlstate})" if sqlstate else "") + (f"; hint: {hint}" if hint else "")
        super().__init__(text)
        self.op, self.message, self.sqlstate, self.hint, self.detail = op, message, sqlstate, hint, detail


class VersionError(MnemeError):
    """The database's SQL API is not one this package supports, or it has
    no mneme.version() (not migrated, or too old)."""


def wrap(op: str, err: psycopg.Error) -> MnemeError:
    d = err.diag
    e = MnemeError(op, d.message_primary or str(err), err.sqlstate, d.message_hint, d.message_detail)
    e.__cause__ = err
    return e


def version_error(op: str, version: Optional[str], cause: Optional[MnemeError]) -> VersionError:
    if cause is not None:
        e = VersionError(op, "mneme.version() does not exist: the database is not migrated or its mneme is too old; "
                         f"this client supports SQL API {SUPPORTED_API}", cause.sqlstate, "run `mneme migrate`")
        e.__cause__ = cause
        return e
    major = int(version.split(".")[0]) if version and version.split(".")[0].isdigit() else 0
    hint = "upgrade mneme_client" if major > _SUPPORTED_MAJOR else "run `mneme migrate` with a newer mneme"
    return VersionError(op, f"mneme SQL API {version} is not supported by mneme_client (supports {SUPPORTED_API})", "0A000", hint)


def check_major(version: str) -> None:
    if version.split(".")[0] != str(_SUPPORTED_MAJOR):
        raise version_error("version", version, None)


@dataclass(frozen=True)
class Retrieval:
    """A row of mneme.search / mneme.retrieve (type mneme.retrieval)."""
    memory_id: uuid.UUID
    kind: str
    summary: Optional[str]
    content: str
    created_at: dt.datetime
    score: float
    rrf: float
    bm25_rank: Optional[int]
    vector_rank: Optional[int]
    retrievability: float
    title: Optional[str]
    label: str
    pinned: bool
    bm25_score: Optional[float]
    vector_distance: Optional[float]
    status: str
    confidence_score: float


@dataclass(frozen=True)
class ContextItem:
    """A row of mneme.context_items."""
    item: int
    memory_id: uuid.UUID
    kind: str
    label: str
    score: float
    first_at: Optional[dt.datetime]
    message_ids: list
    words: int
    text: str


@dataclass(frozen=True)
class Inspection:
    """mneme.inspect."""
    memory_id: uuid.UUID
    conversation_id: uuid.UUID
    kind: str
    status: str
    status_reason: Optional[str]
    label: str
    pinned: bool
    summary: Optional[str]
    content: str
    stability: float
    difficulty: float
    last_reviewed_at: Optional[dt.datetime]
    review_count: int
    supersedes_id: Optional[uuid.UUID]
    superseded_by: Optional[uuid.UUID]
    created_at: dt.datetime
    confidence_score: float
    source_type: str
    source_ref: Optional[str]
    source_message_ids: Optional[list]
    valid_until: Optional[dt.datetime]
    last_confirmed_at: Optional[dt.datetime]
    confirms_id: Optional[uuid.UUID]
    invalidates_id: Optional[uuid.UUID]
    slot: Optional[str]
    revision: Optional[str]


@dataclass(frozen=True)
class HistoryEntry:
    """A row of mneme.history."""
    depth: int
    relation: str
    memory_id: uuid.UUID
    status: str
    status_reason: Optional[str]
    content: str
    supersedes_id: Optional[uuid.UUID]
    confidence_score: float
    source_type: str
    valid_until: Optional[dt.datetime]
    created_at: dt.datetime


@dataclass(frozen=True)
class Message:
    """A row of mneme.conversation_messages."""
    message_id: int
    role: str
    content: str
    created_at: dt.datetime
    consumed_at: Optional[dt.datetime]
    memory_id: Optional[uuid.UUID]
    set_aside_job_id: Optional[int]


@dataclass(frozen=True)
class PoppedMessage:
    """The row of mneme.pop_message: the message taken back."""
    message_id: int
    role: str
    content: str
    created_at: dt.datetime


@dataclass(frozen=True)
class ConversationMemory:
    """A row of mneme.conversation_memories."""
    memory_id: uuid.UUID
    kind: str
    status: str
    label: str
    pinned: bool
    title: Optional[str]
    summary: Optional[str]
    content: str
    source_message_ids: Optional[list]
    source_first_at: Optional[dt.datetime]
    stability: float
    last_reviewed_at: Optional[dt.datetime]
    review_count: int
    confidence_score: float
    supersedes_id: Optional[uuid.UUID]
    created_at: dt.datetime


@dataclass(frozen=True)
class Conversation:
    """A row of mneme.conversations."""
    conversation_id: uuid.UUID
    messages: int
    queued_messages: int
    memories: int
    active_memories: int
    last_message_at: Optional[dt.datetime]
    pending_jobs: int
    failed_jobs: int
    pending_reviews: int


@dataclass(frozen=True)
class Query:
    """One call: its SQL, parameters, and how its rows become a result."""
    op: str
    sql: str
    params: list
    result: Callable[[list], Any]


def call(fn: str, args: Sequence[Any], kind: str, result: Callable[[list], Any], **named: Any) -> Query:
    """mneme.fn(%s, ..., name => %s) with only the named arguments given
    (not None), so the SQL defaults apply to the rest."""
    params = list(args)
    parts = ["%s"] * len(args)
    for name, value in named.items():
        if value is None:
            continue
        params.append(value)
        parts.append(f"{name} => %s" + ("::real[]" if name == "query_embedding" else ""))
    text = f"mneme.{fn}({', '.join(parts)})"
    sql = f"SELECT {text}" if kind == "scalar" else f"SELECT * FROM {text}"
    return Query(fn, sql, params, result)


def scalar(rows: list) -> Any:
    return rows[0][0]


def nothing(rows: list) -> None:
    return None


def of(cls) -> Callable[[list], list]:
    names = [f.name for f in dataclasses.fields(cls)]
    return lambda rows: [cls(**dict(zip(names, r))) for r in rows]


def first(cls) -> Callable[[list], Any]:
    many = of(cls)
    return lambda rows: many(rows)[0]


class Api:
    """The SQL API's calls; a subclass's _run executes a Query (directly,
    or as an awaitable in AsyncMneme)."""

    def _run(self, q: Query):  # pragma: no cover - defined by subclasses
        raise NotImplementedError

    def version(self):
        """mneme.version(): the SQL API's semantic version."""
        return self._run(call("version", [], "scalar", scalar))

    def add_message(self, conversation_id: uuid.UUID, role: str, content: str, at: Optional[dt.datetime] = None):
        """mneme.add_message: appends a message; returns its id (int)."""
        return self._run(call("add_message", [conversation_id, role, content], "scalar", scalar, at=at))

    def pop_message(self, conversation_id: uuid.UUID):
        """mneme.pop_message: removes and returns the latest message (a PoppedMessage, None when there is none)
        while no memory holds it; once segmentation stored it, MnemeError 55000 names the memory."""
        return self._run(call("pop_message", [conversation_id], "rows", lambda rows: of(PoppedMessage)(rows)[0] if rows else None))

    def segment_now(self, conversation_id: uuid.UUID):
        """mneme.segment_now: segment what is queued; returns the job id, or None."""
        return self._run(call("segment_now", [conversation_id], "scalar", scalar))

    def remember(self, conversation_id: uuid.UUID, content: str, *, label: Optional[str] = None,
                 pinned: Optional[bool] = None, valid_until: Optional[dt.datetime] = None,
                 supersedes: Optional[uuid.UUID] = None, title: Optional[str] = None,
                 source_ref: Optional[str] = None, at: Optional[dt.datetime] = None):
        """mneme.remember: stores a fact; returns its memory id (uuid.UUID)."""
        return self._run(call("remember", [conversation_id, content], "scalar", scalar, label=label, pinned=pinned,
                              valid_until=valid_until, supersedes=supersedes, title=title, source_ref=source_ref, at=at))

    def _search(self, fn, conversation_id, query, k, query_embedding, since, until, at, scope, as_of, include_history):
        return self._run(call(fn, [conversation_id, query], "rows", of(Retrieval), k=k, query_embedding=query_embedding,
                              since=since, until=until, at=at, scope=scope, as_of=as_of, include_history=include_history))

    def search(self, conversation_id: uuid.UUID, query: str, k: Optional[int] = None, *,
               query_embedding: Optional[Sequence[float]] = None, since=None, until=None, at=None,
               scope: Optional[str] = None, as_of=None, include_history: Optional[bool] = None):
        """mneme.search: hybrid retrieval without side effects; a list of Retrieval."""
        return self._search("search", conversation_id, query, k, query_embedding, since, until, at, scope, as_of, include_history)

    def retrieve(self, conversation_id: uuid.UUID, query: str, k: Optional[int] = None, *,
                 query_embedding: Optional[Sequence[float]] = None, since=None, until=None, at=None,
                 scope: Optional[str] = None, as_of=None, include_history: Optional[bool] = None):
        """mneme.retrieve: search that records a pending review."""
        return self._search("retrieve", conversation_id, query, k, query_embedding, since, until, at, scope, as_of, include_history)

    def context(self, conversation_id: uuid.UUID, query: str, budget: Optional[int] = None, *,
                query_embedding: Optional[Sequence[float]] = None, since=None, until=None, at=None,
                scope: Optional[str] = None, record: Optional[bool] = None):
        """mneme.context: the memory for a prompt within a word budget (markdown, "" when nothing matches)."""
        return self._run(call("context", [conversation_id, query], "scalar", scalar, budget=budget,
                              query_embedding=query_embedding, since=since, until=until, at=at, scope=scope, record=record))

    def context_items(self, conversation_id: uuid.UUID, query: str, budget: Optional[int] = None, *,
                      query_embedding: Optional[Sequence[float]] = None, since=None, until=None, at=None,
                      scope: Optional[str] = None):
        """mneme.context_items: the items context would render (no side effects)."""
        return self._run(call("context_items", [conversation_id, query], "rows", of(ContextItem), budget=budget,
                              query_embedding=query_embedding, since=since, until=until, at=at, scope=scope))

    def forget(self, memory_id: uuid.UUID, reason: str):
        """mneme.forget: invalidates a memory with a reason (the row stays)."""
        return self._run(call("forget", [memory_id, reason], "scalar", nothing))

    def erase(self, memory_id: uuid.UUID, reason: str):
        """mneme.erase: deletes a memory and every copy of its words (mneme_admin)."""
        return self._run(call("erase", [memory_id, reason], "scalar", nothing))

    def erase_conversation(self, conversation_id: uuid.UUID, reason: str):
        """mneme.erase_conversation (mneme_admin): returns the number of memories erased."""
        return self._run(call("erase_conversation", [conversation_id, reason], "scalar", scalar))

    def pin(self, memory_id: uuid.UUID):
        """mneme.pin."""
        return self._run(call("pin", [memory_id], "scalar", nothing))

    def unpin(self, memory_id: uuid.UUID):
        """mneme.unpin."""
        return self._run(call("unpin", [memory_id], "scalar", nothing))

    def inspect(self, memory_id: uuid.UUID):
        """mneme.inspect: an Inspection."""
        return self._run(call("inspect", [memory_id], "rows", first(Inspection)))

    def history(self, memory_id: uuid.UUID):
        """mneme.history: the lineage both ways, a list of HistoryEntry."""
        return self._run(call("history", [memory_id], "rows", of(HistoryEntry)))

    def messages(self, conversation_id: uuid.UUID):
        """mneme.conversation_messages: a list of Message in order."""
        return self._run(call("conversation_messages", [conversation_id], "rows", of(Message)))

    def memories(self, conversation_id: uuid.UUID):
        """mneme.conversation_memories: a list of ConversationMemory, every status."""
        return self._run(call("conversation_memories", [conversation_id], "rows", of(ConversationMemory)))

    def conversations(self, k: Optional[int] = None):
        """mneme.conversations: the tenant's conversations, most recently active first."""
        return self._run(call("conversations", [], "rows", of(Conversation), k=k))

    def hash_embed(self, text: str):
        """mneme.hash_embed: the built-in embedder's vector (list of floats)."""
        return self._run(Query("hash_embed", "SELECT mneme.hash_embed(%s::text)", [text], scalar))
