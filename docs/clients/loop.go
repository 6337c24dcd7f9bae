// Command loop is mneme's agent loop on the Go client (docs/clients.md; tests/clients_test.go runs it).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/uuid"
	"github.com/mneme-memory/mneme/client"
)

func main() {
	ctx, conv, q := context.Background(), uuid.New(), "where does Alice live?"
	m := client.Must(client.Open(ctx, os.Getenv("DATABASE_URL"), os.Getenv("MNEME_TENANT"))) // behind PgBouncer < 1.21: add default_query_exec_mode=exec
	fmt.Println("conversation", conv)
	for _, msg := range [][2]string{{"user", "Hi, I am planning a trip to see Alice."}, {"assistant", "Where does she live these days?"}, {"user", "She moved to Lisbon last spring."}} {
		client.Must(m.AddMessage(ctx, conv, msg[0], msg[1]))
	}
	fmt.Println("messages 3\nremembered", client.Must(m.Remember(ctx, conv, "Alice lives in Lisbon", client.RememberOptions{})))
	hit := client.Must(m.Search(ctx, conv, q, client.SearchOptions{}))[0]
	fmt.Printf("search: %s (score %.4f)\ncontext:\n%s\n", hit.Content, hit.Score, client.Must(m.Context(ctx, conv, q, client.ContextOptions{Budget: 200})))
	_, err := m.Context(ctx, conv, q, client.ContextOptions{Budget: -1}) // a bad budget: a *client.Error, SQLSTATE 22023; it changed nothing
	fmt.Println("bad budget:", err.(*client.Error).SQLState, err.(*client.Error).Message)
}
