// Command loop is mneme's agent loop in Go with pgx: a new conversation,
// a few messages, one explicit memory, then search, retrieve and the
// context for a prompt inside one set_tenant transaction. docs/clients.md
// explains it; tests/clients_test.go runs it (go run ./docs/clients).
//
//	DATABASE_URL=postgres://my_app@localhost/mydb MNEME_TENANT=acme go run ./docs/clients
//
// Behind PgBouncer before 1.21 (transaction pooling), add
// default_query_exec_mode=exec to the URL: pgx then prepares no named
// statements, which another client's transaction would not find.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	tenant := os.Getenv("MNEME_TENANT")
	if tenant == "" {
		tenant = "default"
	}
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)

	conv := uuid.New() // a new conversation: any uuid the application makes
	fmt.Println("conversation", conv)
	query := "where does Alice live?"

	// set_tenant is transaction-local: every call that needs the tenant
	// runs inside the transaction that set it.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant); err != nil {
			return fmt.Errorf("set_tenant: %w", err)
		}
		for _, m := range [][2]string{
			{"user", "Hi, I am planning a trip to see Alice."},
			{"assistant", "Where does she live these days?"},
			{"user", "She moved to Lisbon last spring."},
		} {
			if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, $2, $3)`, conv, m[0], m[1]); err != nil {
				return fmt.Errorf("add_message: %w", err)
			}
		}
		fmt.Println("messages 3")
		var id uuid.UUID
		if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, conv, "Alice lives in Lisbon").Scan(&id); err != nil {
			return fmt.Errorf("remember: %w", err)
		}
		fmt.Println("remembered", id)

		rows, err := tx.Query(ctx, `SELECT content, score FROM mneme.search($1, $2, 5)`, conv, query)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		var content string
		var score float64
		_, err = pgx.ForEachRow(rows, []any{&content, &score}, func() error {
			fmt.Printf("search: %s (score %.4f)\n", content, score)
			return nil
		})
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}

		// A query embedding is a real[] (a []float32): an application
		// passes its model's vector; here the built-in embedder's.
		var embedding []float32
		if err := tx.QueryRow(ctx, `SELECT mneme.hash_embed($1)`, query).Scan(&embedding); err != nil {
			return fmt.Errorf("hash_embed: %w", err)
		}
		rows, err = tx.Query(ctx, `SELECT content, vector_rank FROM mneme.retrieve($1, $2, 5, $3)`, conv, query, embedding)
		if err != nil {
			return fmt.Errorf("retrieve: %w", err)
		}
		var rank *int32 // NULL: not a candidate of the vector leg
		_, err = pgx.ForEachRow(rows, []any{&content, &rank}, func() error {
			r := "none"
			if rank != nil {
				r = fmt.Sprint(*rank)
			}
			fmt.Printf("retrieve: %s (vector rank %s of a %d-number embedding)\n", content, r, len(embedding))
			return nil
		})
		if err != nil {
			return fmt.Errorf("retrieve: %w", err)
		}

		var prompt string
		if err := tx.QueryRow(ctx, `SELECT mneme.context($1, $2, 200)`, conv, query).Scan(&prompt); err != nil {
			return fmt.Errorf("context: %w", err)
		}
		fmt.Printf("context:\n%s\n", prompt)
		return nil
	})
	if err != nil {
		return err
	}

	// mneme's errors carry an SQLSTATE: 22023 is a bad argument (here a
	// budget of 0 words). The failed call changed nothing.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT mneme.context($1, $2, 0)`, conv, query)
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "22023":
		fmt.Printf("bad budget: %s %s\n", pgErr.Code, pgErr.Message)
	case err != nil:
		return fmt.Errorf("context with a bad budget: %w", err)
	default:
		return errors.New("context with a budget of 0 succeeded: want 22023")
	}
	return nil
}
