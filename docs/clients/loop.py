#!/usr/bin/python3
"""mneme's agent loop in Python with psycopg 3.

A new conversation, a few messages, one explicit memory, then search,
retrieve and the context for a prompt inside one set_tenant transaction.
docs/clients.md explains it; tests/clients_test.go runs it.

    DATABASE_URL=postgres://my_app@localhost/mydb MNEME_TENANT=acme python3 loop.py

Debian's python3-psycopg is installed for /usr/bin/python3; a python3 from a
version manager needs `pip install "psycopg[binary]"` instead.
"""
import os
import sys
import uuid

import psycopg
from psycopg import errors

QUERY = "where does Alice live?"


def main() -> None:
    tenant = os.environ.get("MNEME_TENANT", "default")
    # prepare_threshold=None: psycopg prepares no named statements, so the
    # program also runs behind PgBouncer before 1.21 in transaction pooling.
    with psycopg.connect(os.environ["DATABASE_URL"], prepare_threshold=None) as conn:
        conv = uuid.uuid4()  # a new conversation: any uuid the application makes
        print("conversation", conv)

        # set_tenant is transaction-local: every call that needs the tenant
        # runs inside the transaction that set it.
        with conn.transaction():
            conn.execute("SELECT mneme.set_tenant(%s)", (tenant,))
            for role, content in [
                ("user", "Hi, I am planning a trip to see Alice."),
                ("assistant", "Where does she live these days?"),
                ("user", "She moved to Lisbon last spring."),
            ]:
                conn.execute("SELECT mneme.add_message(%s, %s, %s)", (conv, role, content))
            print("messages 3")
            (memory_id,) = conn.execute(
                "SELECT mneme.remember(%s, %s)", (conv, "Alice lives in Lisbon")
            ).fetchone()
            print("remembered", memory_id)  # a uuid.UUID

            for content, score in conn.execute(
                "SELECT content, score FROM mneme.search(%s, %s, 5)", (conv, QUERY)
            ):
                print(f"search: {content} (score {score:.4f})")

            # A query embedding is a real[] (a list of floats): an application
            # passes its model's vector; here the built-in embedder's. psycopg
            # sends a list of floats as float8[]: the cast says real[].
            (embedding,) = conn.execute("SELECT mneme.hash_embed(%s)", (QUERY,)).fetchone()
            for content, rank in conn.execute(
                "SELECT content, vector_rank FROM mneme.retrieve(%s, %s, 5, %s::real[])",
                (conv, QUERY, embedding),
            ):
                rank = "none" if rank is None else rank  # NULL: not a vector candidate
                print(f"retrieve: {content} (vector rank {rank} of a {len(embedding)}-number embedding)")

            (context,) = conn.execute(
                "SELECT mneme.context(%s, %s, 200)", (conv, QUERY)
            ).fetchone()
            print(f"context:\n{context}")

        # mneme's errors carry an SQLSTATE: 22023 (InvalidParameterValue) is a
        # bad argument, here a budget of 0 words. The failed call changed nothing.
        try:
            with conn.transaction():
                conn.execute("SELECT mneme.set_tenant(%s)", (tenant,))
                conn.execute("SELECT mneme.context(%s, %s, 0)", (conv, QUERY))
        except errors.InvalidParameterValue as e:
            print(f"bad budget: {e.sqlstate} {e.diag.message_primary}")
        else:
            sys.exit("context with a budget of 0 succeeded: want 22023")


if __name__ == "__main__":
    main()
