package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/version"
)

// mneme version prints the binary's version and the SQL API's it speaks;
// with DATABASE_URL, the database's mneme.version() too, which agrees after
// a migrate; a database of another major is an error naming both.
func TestVersionCommand(t *testing.T) {
	out, stderr, code := mneme(t, "", nil, "version")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "mneme "+version.Binary()+"\nSQL API "+version.SQLAPI()+" (spoken and migrated to by this binary)\n", out)

	db := dbtest.New(t, dbtest.WithVector("array"))
	var dbAPI string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT mneme.version()`).Scan(&dbAPI))
	require.Equal(t, version.SQLAPI(), dbAPI, "mneme version and mneme.version() agree")
	out, stderr, code = mneme(t, "", []string{"DATABASE_URL=" + db.URL}, "version")
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.HasSuffix(out, "\ndatabase SQL API "+dbAPI+" (DATABASE_URL)\n"), out)

	_, err := db.Pool.Exec(context.Background(), `CREATE OR REPLACE FUNCTION mneme.version() RETURNS text LANGUAGE sql AS $$ SELECT '99.0.0'::text $$`)
	require.NoError(t, err)
	out, stderr, code = mneme(t, "", []string{"DATABASE_URL=" + db.URL}, "version")
	require.Equal(t, 1, code)
	require.Contains(t, out, "database SQL API 99.0.0")
	require.Contains(t, stderr, "the database's SQL API is 99.0.0, this mneme "+version.Binary()+" speaks "+version.SQLAPI())
}
