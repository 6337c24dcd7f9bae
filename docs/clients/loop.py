#!/usr/bin/python3
"""mneme's agent loop on mneme_client (docs/clients.md; tests/clients_test.go runs it):

    pip install ./clients/python   # or PYTHONPATH=clients/python/src
    DATABASE_URL=postgres://my_app@localhost/mydb MNEME_TENANT=acme python3 docs/clients/loop.py
"""
import os
import uuid

from mneme_client import Mneme, MnemeError

QUERY = "where does Alice live?"
with Mneme.connect(os.environ["DATABASE_URL"], tenant=os.environ.get("MNEME_TENANT")) as m:
    conv = uuid.uuid4()  # a new conversation: any uuid the application makes
    print("conversation", conv)
    for role, content in [("user", "Hi, I am planning a trip to see Alice."), ("assistant", "Where does she live these days?"),
                          ("user", "She moved to Lisbon last spring.")]:
        m.add_message(conv, role, content)
    print("messages 3\nremembered", m.remember(conv, "Alice lives in Lisbon"))
    hit = m.search(conv, QUERY)[0]
    print(f"search: {hit.content} (score {hit.score:.4f})\ncontext:\n{m.context(conv, QUERY, 200)}")
    try:
        m.context(conv, QUERY, -1)  # a bad budget: MnemeError, SQLSTATE 22023; it changed nothing
    except MnemeError as e:
        print(f"bad budget: {e.sqlstate} {e.message}")
