import datetime as dt
import uuid

import psycopg
import pytest

from conftest import TENANT, url
from mneme_client import SUPPORTED_API, Inspection, Mneme, MnemeError, PoppedMessage, Retrieval, VersionError


def state(exc_info) -> str:
    return exc_info.value.sqlstate


def test_connect_checks_version():
    assert SUPPORTED_API == ">=1.0.0 <2.0.0"
    with pytest.raises(VersionError) as e:
        Mneme.connect(url("MNEME_EMPTY_URL"))
    assert "the database is not migrated or its mneme is too old" in str(e.value)
    assert e.value.hint == "run `mneme migrate`"
    with pytest.raises(VersionError) as e:
        Mneme.connect(url("MNEME_V2_URL"))
    assert e.value.message == "mneme SQL API 2.0.0 is not supported by mneme_client (supports >=1.0.0 <2.0.0)"
    assert e.value.hint == "upgrade mneme_client"


def test_every_function(app, admin, conv):
    assert app.version() == "1.0.0"
    ids = [app.add_message(conv, "user", "Hi, I am planning a trip to see Alice."),
           app.add_message(conv, "assistant", "Where does she live these days?"),
           app.add_message(conv, "user", "She moved to Lisbon last spring.", at=dt.datetime.now(dt.timezone.utc))]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids)
    msgs = app.messages(conv)
    assert [(m.message_id, m.role) for m in msgs] == list(zip(ids, ["user", "assistant", "user"]))
    # pop_message takes back the latest message and returns it; added again, it is the same.
    popped = app.pop_message(conv)
    assert isinstance(popped, PoppedMessage)
    assert (popped.message_id, popped.role, popped.content) == (ids[2], "user", "She moved to Lisbon last spring.")
    assert len(app.messages(conv)) == 2
    ids[2] = app.add_message(conv, "user", "She moved to Lisbon last spring.")
    assert app.pop_message(uuid.uuid4()) is None
    with pytest.raises(MnemeError) as e:
        app.pop_message(None)
    assert e.value.sqlstate == "22004"

    mem = app.remember(conv, "Alice lives in Lisbon", label="user_profile", title="alice-home")
    assert isinstance(mem, uuid.UUID)
    hits = app.search(conv, "where does Alice live?")
    assert len(hits) == 1 and isinstance(hits[0], Retrieval)
    h = hits[0]
    assert (h.memory_id, h.content, h.label, h.title, h.kind, h.status, h.bm25_rank) == \
        (mem, "Alice lives in Lisbon", "user_profile", "alice-home", "semantic", "active", 1)

    emb = app.hash_embed("where does Alice live?")
    assert len(emb) == 256
    got = app.retrieve(conv, "where does Alice live?", 3, query_embedding=emb, scope="conversation")
    assert [(r.memory_id, r.vector_rank) for r in got] == [(mem, 1)]

    assert app.context(conv, "where does Alice live?", 200) == "- Alice lives in Lisbon"
    assert app.context(conv, "where does Alice live?", 200, record=False) == "- Alice lives in Lisbon"
    items = app.context_items(conv, "where does Alice live?", 200)
    assert [i.memory_id for i in items] == [mem] and "Alice lives in Lisbon" in items[0].text

    app.pin(mem)
    assert app.inspect(mem).pinned
    app.unpin(mem)
    ins = app.inspect(mem)
    assert isinstance(ins, Inspection) and not ins.pinned and ins.conversation_id == conv and ins.source_type == "explicit"

    newer = app.remember(conv, "Alice lives in Porto", supersedes=mem, at=dt.datetime.now(dt.timezone.utc))
    assert sorted((e.memory_id == newer, e.status) for e in app.history(newer)) == [(False, "superseded"), (True, "active")]
    app.forget(newer, "the user said it was wrong")
    assert (app.inspect(newer).status, app.inspect(newer).status_reason) == ("invalidated", "the user said it was wrong")
    assert len(app.memories(conv)) == 2
    assert isinstance(app.segment_now(conv), int)
    assert app.segment_now(uuid.uuid4()) is None
    assert any(c.conversation_id == conv and c.messages == 3 for c in app.conversations(1000))

    with pytest.raises(MnemeError) as e:
        app.erase(mem, "right to be forgotten")
    assert state(e) == "42501"
    admin.erase(mem, "right to be forgotten")
    with pytest.raises(MnemeError) as e:
        app.inspect(mem)
    assert state(e) == "P0002"
    assert admin.erase_conversation(conv, "account closed") == 1
    assert app.messages(conv) == []


def test_bad_input_is_a_mneme_error_and_writes_nothing(app, conv):
    app.add_message(conv, "user", "hello there")
    with pytest.raises(MnemeError) as e:
        app.context(conv, "x", 0)
    err = e.value
    assert (err.sqlstate, err.op, err.message) == ("22023", "context", "budget must be 1 to 100000 words, got 0")
    assert "the budget is the most words" in err.hint
    assert isinstance(err.__cause__, psycopg.errors.InvalidParameterValue)
    for call, code in [
        (lambda: app.add_message(conv, "user", None), "22004"),
        (lambda: app.add_message(conv, "robot", "hi"), "22023"),
        (lambda: app.remember(conv, "x", label="nonsense"), "22023"),
        (lambda: app.inspect(uuid.uuid4()), "P0002"),
        (lambda: app.add_message("not-a-uuid", "user", "hi"), "22P02"),
        (lambda: app.set_tenant("acme"), "25P01"),
        (lambda: app.with_tenant("nobody").search(conv, "x"), "22023"),
    ]:
        with pytest.raises(MnemeError) as e:
            call()
        assert state(e) == code, str(e.value)
    with pytest.raises(MnemeError):
        with app.transaction() as tx:
            tx.add_message(conv, "user", "rolled back")
            tx.context(conv, "x", 0)
    assert len(app.messages(conv)) == 1


def test_tenants(app, conv):
    mem = app.remember(conv, "Bob works at acme")
    default = app.with_tenant(None)
    assert default.search(conv, "Bob") == []
    with pytest.raises(MnemeError) as e:
        default.inspect(mem)
    assert state(e) == "P0002"
    with default.transaction() as tx:
        tx.set_tenant(TENANT)
        assert len(tx.search(conv, "Bob")) == 1
    # A plain psycopg connection (prepare_threshold=None) works too.
    with psycopg.connect(url("MNEME_APP_URL"), autocommit=True, prepare_threshold=None) as c:
        assert len(Mneme(c, TENANT).search(conv, "Bob")) == 1
