package scratch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWithDatabase(t *testing.T) {
	got, err := WithDatabase("postgres://u:p@127.0.0.1:5432/app?sslmode=disable", "mneme_eval_x")
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@127.0.0.1:5432/mneme_eval_x?sslmode=disable", got)
	got, err = WithDatabase("host=127.0.0.1 port=5432 dbname=app", "mneme_eval_x")
	require.NoError(t, err)
	require.Equal(t, "host=127.0.0.1 port=5432 dbname=app dbname=mneme_eval_x", got, "the last dbname wins")
}
