-- Inputs that one tenant or one message could turn into unbounded work:
--  - extract_facts_max caps the facts one episode stores (mneme.add_fact
--    refuses more; the segment job stops at the cap before writing);
--  - mneme.claim_jobs serves tenants in turn (least recently served first),
--    reading each tenant's oldest ready jobs through jobs_ready_tenant_idx,
--    and remembers when it last served each tenant in mneme.job_turns.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
INSERT INTO mneme.settings (key, value, description) VALUES
  ('extract_facts_max', '20',
   'segmentation stores at most this many extracted facts per episode (the first ones in message order; the episode keeps the whole text)')
ON CONFLICT (key) DO NOTHING;

CREATE INDEX jobs_ready_tenant_idx ON mneme.jobs (tenant_id, run_at, id) WHERE state = 'pending';

-- When claim_jobs last handed out a job of each tenant. No conversation
-- data: tenant ids (listed in mneme.tenants already) and times. Written only
-- by claim_jobs (SECURITY DEFINER, as mneme_owner).
CREATE TABLE mneme.job_turns (
    tenant_id text PRIMARY KEY,
    served_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE mneme.job_turns;
DROP INDEX mneme.jobs_ready_tenant_idx;
DELETE FROM mneme.settings WHERE key = 'extract_facts_max';
