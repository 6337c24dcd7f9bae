"""MnemeStore against LangGraph's BaseStore contract. Debian has no
langgraph package, so these tests call the store the way LangGraph does
(its method names, keyword arguments and operation tuples: GetOp,
SearchOp, PutOp, ListNamespacesOp, MatchCondition) without LangGraph
itself; where langgraph is installed the store subclasses its BaseStore
and the same tests run against it."""
import asyncio
import uuid

import pytest

from conftest import TENANT, url
from mneme_client import Mneme, MnemeError
from mneme_client.langgraph import (HAVE_LANGGRAPH, GetOp, Item, ListNamespacesOp, MatchCondition, MnemeStore, PutOp,
                                    SearchItem, SearchOp)


@pytest.fixture
def store(app):
    return MnemeStore(app.conn, tenant=TENANT)


def agent_node(state: dict, *, store) -> dict:
    """A LangGraph node as LangGraph calls it (the store injected by
    keyword): it remembers what the user says, and answers questions from
    a store search."""
    ns = (TENANT, state["conversation"], "user_profile")
    text = state["input"]
    if text.startswith("remember: "):
        store.put(ns, "home", {"content": text[len("remember: "):]})
        return {"answer": "noted"}
    hits = store.search(ns, query=text, limit=3)
    return {"answer": "; ".join(h.value["content"] for h in hits) or "I do not know"}


def test_a_node_writes_and_a_later_turn_searches(store, app):
    conv = str(uuid.uuid4())
    assert agent_node({"conversation": conv, "input": "remember: Alice lives in Lisbon"}, store=store) == {"answer": "noted"}
    assert agent_node({"conversation": conv, "input": "where does Alice live?"}, store=store) == {"answer": "Alice lives in Lisbon"}
    [hit] = app.search(uuid.UUID(conv), "Alice")
    assert (hit.content, hit.label, hit.title) == ("Alice lives in Lisbon", "user_profile", "home")


def test_store_methods(store, app):
    conv = str(uuid.uuid4())
    ns = (TENANT, conv)
    assert store.get(ns, "home") is None
    store.put(ns, "home", {"content": "Alice lives in Lisbon"})
    first = store.get(ns, "home")
    assert isinstance(first, Item)
    assert (first.value, first.key, tuple(first.namespace)) == ({"content": "Alice lives in Lisbon"}, "home", ns)
    store.put(ns, "home", {"content": "Alice lives in Porto"}, index=False)
    assert store.get(ns, "home").value == {"content": "Alice lives in Porto"}
    [cur] = app.search(uuid.UUID(conv), "Alice Porto", 1)
    assert sorted(h.status for h in app.history(cur.memory_id)) == ["active", "superseded"]
    store.put(ns, "home", {"content": "Alice lives in Porto"})  # the same value: nothing written
    assert len(app.memories(uuid.UUID(conv))) == 2

    store.put((TENANT, conv, "general"), "prefs", {"food": "pizza", "likes": ["jazz"]})
    assert store.get(ns, "prefs").value == {"food": "pizza", "likes": ["jazz"]}
    found = store.search(ns, query="pizza", limit=5)
    assert found[0].key == "prefs" and isinstance(found[0], SearchItem) and isinstance(found[0].score, float)
    assert [f.key for f in store.search(ns, filter={"food": "pizza"})] == ["prefs"]
    assert all(f.namespace[2] == "general" for f in store.search((TENANT, conv, "general")))
    assert store.search((TENANT, conv, "important")) == []
    assert len(store.search(ns, limit=1, offset=1)) == 1

    assert store.list_namespaces(prefix=(TENANT, conv)) == [(TENANT, conv), (TENANT, conv, "general")]
    assert store.list_namespaces(prefix=(TENANT, conv), max_depth=2) == [(TENANT, conv)]
    assert (TENANT, conv, "general") in store.list_namespaces(prefix=(TENANT,), suffix=("general",), limit=1000)

    # batch takes LangGraph's operation tuples and answers each in order.
    got = store.batch([GetOp(ns, "prefs"), SearchOp(ns, None, 1, 0, "pizza"), PutOp(ns, "note", {"content": "Bob is Alice's brother"}),
                       ListNamespacesOp((MatchCondition("prefix", (TENANT, conv)),), 2, 10, 0)])
    assert got[0].key == "prefs" and got[1][0].key == "prefs" and got[2] is None and got[3] == [(TENANT, conv)]
    assert store.get(ns, "note").value == {"content": "Bob is Alice's brother"}

    store.delete(ns, "home")  # forget: invalidated, kept
    assert store.get(ns, "home") is None
    assert app.inspect(cur.memory_id).status == "invalidated"

    # erase mode deletes for good (mneme_admin).
    with Mneme.connect(url("MNEME_ADMIN_URL"), tenant=TENANT) as admin:
        MnemeStore(admin.conn, tenant=TENANT, delete_mode="erase").delete(ns, "prefs")
    assert all(m.title != "prefs" for m in app.memories(uuid.UUID(conv)))


def test_async_methods(store):
    conv = str(uuid.uuid4())
    ns = (TENANT, conv)

    async def main():
        await store.aput(ns, "home", {"content": "Alice lives in Lisbon"})
        assert (await store.aget(ns, "home")).value == {"content": "Alice lives in Lisbon"}
        assert [i.key for i in await store.asearch(ns, query="Alice")] == ["home"]
        assert await store.alist_namespaces(prefix=ns, max_depth=2) == [ns]
        await store.adelete(ns, "home")
        assert await store.aget(ns, "home") is None
        return await store.abatch([GetOp(ns, "home")])
    assert asyncio.run(main()) == [None]


def test_bad_namespace_or_value(store):
    with pytest.raises(MnemeError) as e:
        store.get(("users", "alice"), "k")
    assert e.value.sqlstate == "22023" and "namespace is (tenant, conversation uuid)" in e.value.message
    with pytest.raises(MnemeError) as e:
        store.put((TENANT, str(uuid.uuid4()), "nonsense"), "k", {"content": "x"})
    assert e.value.sqlstate == "22023"
    with pytest.raises(MnemeError) as e:
        store.put((TENANT, str(uuid.uuid4())), "k", {"content": " "})
    assert e.value.sqlstate == "22023"
    assert isinstance(HAVE_LANGGRAPH, bool)
