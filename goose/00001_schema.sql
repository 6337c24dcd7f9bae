-- mneme foundation schema: conversations, messages, memories, jobs, settings.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS mneme;

-- Tunables. Defaults are documented in docs/settings.md; every key a function
-- reads has a row here, so a missing key is a bug, not a silent default.
CREATE TABLE mneme.settings (
    key         text PRIMARY KEY CHECK (key ~ '^[a-z][a-z0-9_]*$'),
    value       jsonb NOT NULL,
    description text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now()
);

INSERT INTO mneme.settings (key, value, description) VALUES
  ('segment_min_messages', '5',      'fewer queued messages than this: never segment'),
  ('segment_max_messages', '30',     'this many queued messages or more: force a segment'),
  ('segment_gap_seconds',  '900',    'a gap longer than this since the previous message forces a segment (the late message starts the next episode)'),
  ('segment_min_chars',    '5',      'a latest message shorter than this (characters, trimmed): do not ask the segmenter'),
  ('message_max_chars',    '100000', 'add_message rejects content longer than this many characters'),
  ('rrf_k',                '60',     'reciprocal rank fusion constant: rrf = sum(1 / (rrf_k + rank))'),
  ('retrieve_candidates',  '100',    'candidates taken from each retrieval leg (BM25, vector) before fusion'),
  ('label_weights', '{"important":1.5,"user_profile":1.3,"project":1.2,"general":1.0,"temporary":0.8,"trivial":0.5}',
                                      'score multiplier per label; labels project_* use the "project" weight; unknown labels weigh 1.0'),
  ('embedder',             '"hash"', 'query embedder: "hash" (built in, SQL computes query embeddings) or "external" (the sidecar embeds; retrieve without an embedding skips the vector leg)');

-- One row per conversation (id = conversation id). pending_reviews: NULL when
-- there are none, else an array of {"query": text, "memory_ids": [uuid...]},
-- one entry per retrieval, taken and cleared by take_pending_reviews.
CREATE TABLE mneme.message_queue (
    id              uuid PRIMARY KEY,
    pending_reviews jsonb DEFAULT NULL
        CHECK (pending_reviews IS NULL OR jsonb_typeof(pending_reviews) = 'array'),
    speakers        text[] NOT NULL DEFAULT '{}',
    last_message_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Messages are kept after segmentation (consumed_at set), so a memory's
-- source span always points at real rows.
CREATE TABLE mneme.messages (
    id              bigserial PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES mneme.message_queue (id) ON DELETE CASCADE,
    role            text NOT NULL,
    content         text NOT NULL CHECK (content <> ''),
    created_at      timestamptz NOT NULL,
    consumed_at     timestamptz,
    memory_id       uuid
);
CREATE INDEX messages_conversation_idx ON mneme.messages (conversation_id, id);
CREATE INDEX messages_queued_idx ON mneme.messages (conversation_id, id) WHERE consumed_at IS NULL;

CREATE TABLE mneme.memories (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id    uuid NOT NULL,
    kind               text NOT NULL DEFAULT 'semantic' CHECK (kind IN ('episodic', 'semantic')),
    title              text,
    content            text NOT NULL CHECK (btrim(content) <> ''),
    summary            text,
    source_message_ids bigint[],
    source_first_at    timestamptz,
    source_last_at     timestamptz,
    surprise           real NOT NULL DEFAULT 0 CHECK (surprise BETWEEN 0 AND 1),
    -- FSRS state. Defaults are go-fsrs v3's first review rated good, so a
    -- plain insert is a fresh memory with retrievability 1.
    stability          float8 NOT NULL DEFAULT 3.173 CHECK (stability > 0),
    difficulty         float8 NOT NULL DEFAULT 5.28243442 CHECK (difficulty BETWEEN 1 AND 10),
    last_reviewed_at   timestamptz NOT NULL DEFAULT now(),
    review_count       int NOT NULL DEFAULT 0 CHECK (review_count >= 0),
    label              text NOT NULL DEFAULT 'general' CHECK (label ~ '^[a-z][a-z0-9_]*$'),
    pinned             boolean NOT NULL DEFAULT false,
    status             text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'superseded', 'invalidated', 'inactive')),
    status_reason      text,
    confidence_score   real NOT NULL DEFAULT 1 CHECK (confidence_score BETWEEN 0 AND 1),
    valid_until        timestamptz,
    last_confirmed_at  timestamptz,
    source_type        text NOT NULL DEFAULT 'explicit'
        CHECK (source_type IN ('conversation', 'explicit', 'extracted', 'import')),
    source_ref         text,
    supersedes_id      uuid REFERENCES mneme.memories (id),
    metadata           jsonb NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memories_no_self_supersede CHECK (supersedes_id IS NULL OR supersedes_id <> id)
);
CREATE INDEX memories_conversation_idx ON mneme.memories (conversation_id, created_at);
CREATE INDEX memories_supersedes_idx ON mneme.memories (supersedes_id) WHERE supersedes_id IS NOT NULL;

-- The durable work queue (transactional outbox): SQL functions insert jobs in
-- the caller's transaction; sidecars claim them with FOR UPDATE SKIP LOCKED.
CREATE TABLE mneme.jobs (
    id              bigserial PRIMARY KEY,
    kind            text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_]*$'),
    conversation_id uuid,
    payload         jsonb NOT NULL DEFAULT '{}',
    state           text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempts        int NOT NULL DEFAULT 0,
    max_attempts    int NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    run_at          timestamptz NOT NULL DEFAULT now(),
    locked_by       text,
    locked_until    timestamptz,
    last_error      text,
    dedupe_key      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
-- A conversation never has two pending segment jobs.
CREATE UNIQUE INDEX jobs_one_pending_segment ON mneme.jobs (conversation_id)
    WHERE kind = 'segment' AND state = 'pending';
CREATE UNIQUE INDEX jobs_pending_dedupe ON mneme.jobs (dedupe_key)
    WHERE state = 'pending' AND dedupe_key IS NOT NULL;
CREATE INDEX jobs_ready_idx ON mneme.jobs (run_at, id) WHERE state = 'pending';
CREATE INDEX jobs_running_idx ON mneme.jobs (locked_until) WHERE state = 'running';

-- +goose Down
DROP SCHEMA mneme CASCADE;
