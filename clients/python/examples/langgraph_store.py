"""LangGraph with mneme as the store: builder.compile(store=store)."""
import os
import uuid

from mneme_client import Mneme
from mneme_client.langgraph import MnemeStore

tenant = os.environ.get("MNEME_TENANT", "default")
with Mneme.connect(os.environ["DATABASE_URL"]) as m:
    store = MnemeStore(m.conn, tenant=tenant)
    ns = (tenant, str(uuid.uuid4()), "user_profile")  # a namespace: tenant, conversation, label
    store.put(ns, "home", {"content": "Alice lives in Lisbon"})  # mneme.remember
    print([item.value["content"] for item in store.search(ns, query="where does Alice live?", limit=3)])
    store.put(ns, "home", {"content": "Alice lives in Porto"})  # supersedes; the old belief stays in history
    print(store.get(ns, "home").value)
