// Command loop is mneme's agent loop on the Go client (docs/clients.md; tests/clients_test.go runs it).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mneme-memory/mneme/client"
)

func main() {
	ctx, conv, q := context.Background(), uuid.New(), "where does Alice live?"
	pool := must(pgxpool.New(ctx, os.Getenv("DATABASE_URL"))) // behind PgBouncer < 1.21: add default_query_exec_mode=exec
	m := must(client.Connect(ctx, pool)).WithTenant(os.Getenv("MNEME_TENANT"))
	fmt.Println("conversation", conv)
	for _, msg := range [][2]string{{"user", "Hi, I am planning a trip to see Alice."}, {"assistant", "Where does she live these days?"}, {"user", "She moved to Lisbon last spring."}} {
		must(m.AddMessage(ctx, conv, msg[0], msg[1]))
	}
	fmt.Println("messages 3\nremembered", must(m.Remember(ctx, conv, "Alice lives in Lisbon", client.RememberOptions{})))
	hit := must(m.Search(ctx, conv, q, client.SearchOptions{}))[0]
	fmt.Printf("search: %s (score %.4f)\ncontext:\n%s\n", hit.Content, hit.Score, must(m.Context(ctx, conv, q, client.ContextOptions{Budget: 200})))
	_, err := m.Context(ctx, conv, q, client.ContextOptions{Budget: -1}) // a bad budget: *client.Error, SQLSTATE 22023; it changed nothing
	if e, ok := err.(*client.Error); ok && e.SQLState == "22023" {
		fmt.Println("bad budget:", e.SQLState, e.Message)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
