package migrate

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
)

// citusGoose are the goose migrations that a distributed mneme (Citus)
// runs in another form than their released file, which never changes
// (goose/frozen.sha256): a database distributed by a release before the
// migration applies it on distributed tables, where the file's statement
// is refused. Each replaces the file of its version on a distributed
// mneme only (gooseUp); a database distributed after the version was
// applied never runs it. docs/scale.md lists them.
var citusGoose = map[int64][]string{
	// 00070_review_log_asked_in.sql fills asked_in by an UPDATE of
	// review_log joined with jobs by the job's id, which Citus refuses
	// ("complex joins are only supported when all distributed tables are
	// co-located and joined on their distribution columns": a review job's
	// conversation is the one that asked, the review's the memory's). Here
	// the review jobs' conversations are read first, into a map by job id,
	// and review_log is updated from it.
	70: {
		`ALTER TABLE mneme.review_log ADD COLUMN asked_in uuid`,
		`ALTER TABLE mneme.review_log NO FORCE ROW LEVEL SECURITY`,
		`ALTER TABLE mneme.jobs NO FORCE ROW LEVEL SECURITY`,
		`DO $asked_in$
		DECLARE
		    v_map jsonb;
		BEGIN
		    SELECT jsonb_object_agg(j.id::text, j.conversation_id) INTO v_map FROM mneme.jobs j WHERE j.kind = 'review';
		    IF v_map IS NOT NULL THEN
		        EXECUTE 'UPDATE mneme.review_log l SET asked_in = ($1 ->> l.job_id::text)::uuid
		                 WHERE l.job_id IS NOT NULL AND $1 ? l.job_id::text' USING v_map;
		    END IF;
		END
		$asked_in$`,
		`ALTER TABLE mneme.review_log FORCE ROW LEVEL SECURITY`,
		`ALTER TABLE mneme.jobs FORCE ROW LEVEL SECURITY`,
		`CREATE INDEX review_log_asked_in_idx ON mneme.review_log (asked_in) WHERE asked_in IS NOT NULL`,
	},
	// 00310_review_query_texts.sql drops review_log's query triggers
	// before it drops matched_queries, which Citus refuses on a distributed
	// table ("triggers are not supported on distributed tables") unless
	// citus.enable_unsafe_triggers is on, as the SQL layer sets it
	// (applySQL). The rest is the file's: the fill is an INSERT ... SELECT
	// grouped by the conversation, which Citus pushes down when
	// review_queries is distributed (a database distributed after goose
	// 00180) and runs through the coordinator when it is still local (goose
	// 00180 made it in this same run; citusNewTables distributes it after).
	310: {
		`SET LOCAL citus.enable_unsafe_triggers = on`,
		`DROP TRIGGER IF EXISTS review_log_queries_update ON mneme.review_log`,
		`DROP TRIGGER IF EXISTS review_log_queries_insert ON mneme.review_log`,
		`DROP TRIGGER IF EXISTS review_log_queries ON mneme.review_log`,
		`DROP FUNCTION IF EXISTS mneme._strip_review_queries(text[], text[], uuid[])`,
		`ALTER TABLE mneme.review_queries ADD COLUMN query text`,
		`ALTER TABLE mneme.review_queries ADD COLUMN ord int`,
		`ALTER TABLE mneme.review_queries NO FORCE ROW LEVEL SECURITY`,
		`ALTER TABLE mneme.review_log NO FORCE ROW LEVEL SECURITY`,
		`DELETE FROM mneme.review_queries`,
		`INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key, query, ord)
		 SELECT l.conversation_id, l.id, l.tenant_id, md5(u.q)::uuid, u.q, min(u.o)::int
		 FROM mneme.review_log l, unnest(l.matched_queries) WITH ORDINALITY AS u(q, o)
		 WHERE u.q IS NOT NULL
		 GROUP BY l.conversation_id, l.id, l.tenant_id, u.q`,
		`ALTER TABLE mneme.review_queries ALTER COLUMN query SET NOT NULL`,
		`ALTER TABLE mneme.review_queries ALTER COLUMN ord SET NOT NULL`,
		`ALTER TABLE mneme.review_queries ADD CONSTRAINT review_queries_key_is_md5 CHECK (query_key = md5(query)::uuid)`,
		`ALTER TABLE mneme.review_queries ADD CONSTRAINT review_queries_ord_positive CHECK (ord > 0)`,
		`ALTER TABLE mneme.review_log DROP COLUMN matched_queries`,
		`ALTER TABLE mneme.review_queries FORCE ROW LEVEL SECURITY`,
		`ALTER TABLE mneme.review_log FORCE ROW LEVEL SECURITY`,
	},
}

// citusGooseMigrations are citusGoose as goose migrations (up only: a
// distributed mneme is not migrated down).
func citusGooseMigrations() (versions []int64, ms []*goose.Migration) {
	for v, stmts := range citusGoose {
		versions = append(versions, v)
		ms = append(ms, goose.NewGoMigration(v, &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
			for _, q := range stmts {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("goose %05d on Citus: %w", v, err)
				}
			}
			return nil
		}}, nil))
	}
	return versions, ms
}

// distributedNow reports whether mneme's tables are distributed by Citus
// already (a migrate after --citus).
func distributedNow(ctx context.Context, db *sql.DB) (bool, error) {
	var d bool
	err := db.QueryRowContext(ctx, `SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL
		AND to_regclass('mneme.memories') IS NOT NULL`).Scan(&d)
	if err != nil || !d {
		return false, err
	}
	err = db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'mneme.memories'::regclass)`).Scan(&d)
	return d, err
}

// citusNewTables distributes the tables a goose migration made after the
// database was distributed (mneme.erasures, 00071, on a database that an
// earlier release distributed), as sql/citus/distribute.sql does for a
// fresh one: the reference tables it names, every other table by its
// conversation, colocated with mneme.message_queue.
const citusNewTables = `DO $new_tables$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_catalog.pg_class c
             WHERE c.relnamespace = 'mneme'::regnamespace AND c.relkind IN ('r', 'p')
               AND NOT c.relispartition
               AND c.oid NOT IN (SELECT p.logicalrelid FROM pg_catalog.pg_dist_partition p)
               AND c.relname <> 'call_marks' -- local: on Citus the marks are settings (mneme._mark)
             ORDER BY c.relname LOOP
        IF t = 'llm_usage_days' THEN
            DROP POLICY IF EXISTS tenant_rows ON mneme.llm_usage_days;
            CREATE POLICY tenant_rows ON mneme.llm_usage_days
                USING (mneme._is_worker() OR tenant_id = mneme._tenant() OR mneme._is_operator())
                WITH CHECK (mneme._is_worker() OR tenant_id = mneme._tenant());
            PERFORM create_reference_table('mneme.llm_usage_days');
        ELSIF t IN ('tenants', 'settings', 'tenant_logins', 'job_kinds', 'job_turns', 'erasures', 'instance_key') THEN
            PERFORM create_reference_table(format('mneme.%I', t));
        ELSIF t = 'llm_calls' THEN
            -- as sql/citus/distribute.sql: the operator's policy, the
            -- conversation in the key (a job of none has the nil one)
            DROP POLICY IF EXISTS tenant_rows ON mneme.llm_calls;
            CREATE POLICY tenant_rows ON mneme.llm_calls
                USING (mneme._is_worker() OR tenant_id = mneme._tenant() OR mneme._is_operator())
                WITH CHECK (mneme._is_worker() OR tenant_id = mneme._tenant());
            UPDATE mneme.llm_calls SET conversation_id = '00000000-0000-0000-0000-000000000000' WHERE conversation_id IS NULL;
            ALTER TABLE mneme.llm_calls DROP CONSTRAINT llm_calls_pkey;
            ALTER TABLE mneme.llm_calls ADD PRIMARY KEY (conversation_id, id);
            PERFORM create_distributed_table('mneme.llm_calls', 'conversation_id', colocate_with => 'mneme.message_queue');
        ELSIF t IN ('job_refs', 'review_queries') THEN
            -- (goose 00180) the policy without subqueries, as sql/citus/distribute.sql
            EXECUTE format('DROP POLICY IF EXISTS tenant_rows ON mneme.%I', t);
            EXECUTE format('CREATE POLICY tenant_rows ON mneme.%I '
                           'USING (mneme._is_worker() OR tenant_id = mneme._tenant()) '
                           'WITH CHECK (mneme._is_worker() OR tenant_id = mneme._tenant())', t);
            PERFORM create_distributed_table(format('mneme.%I', t), 'conversation_id', colocate_with => 'mneme.message_queue');
        ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                      WHERE a.attrelid = format('mneme.%I', t)::regclass AND a.attname = 'conversation_id' AND NOT a.attisdropped) THEN
            PERFORM create_distributed_table(format('mneme.%I', t), 'conversation_id', colocate_with => 'mneme.message_queue');
        ELSE
            RAISE EXCEPTION 'mneme.% is neither a reference table nor has a conversation to be distributed by', t
                USING HINT = 'say in sql/citus/distribute.sql and sidecar/migrate/citus_goose.go how Citus holds it';
        END IF;
    END LOOP;
END
$new_tables$`
