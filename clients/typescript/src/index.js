// @mneme-memory/client: mneme's SQL API as typed functions on node-postgres.
// A thin layer: every method is one parameterised call of a mneme.*
// function, with no logic of its own. Types: index.d.ts.
//
// No query has a `name`: pg runs a query with parameters as an unnamed
// statement, so the client also runs behind PgBouncer (before 1.21) in
// transaction pooling. A tenant is set with mneme.set_tenant inside the
// transaction of the calls it governs (it is transaction-local).

/** The mneme SQL API versions this package supports: major 1 (mneme.version()). */
export const SUPPORTED_API = '>=1.0.0 <2.0.0';
const SUPPORTED_MAJOR = 1;

/**
 * A mneme (or PostgreSQL) error: message is the server's, op the mneme
 * function called, sqlstate the SQLSTATE, hint mneme's HINT, cause pg's
 * error.
 */
export class MnemeError extends Error {
  constructor(message, { op, sqlstate, hint, detail, cause } = {}) {
    super(message, cause ? { cause } : undefined);
    this.name = 'MnemeError';
    this.op = op;
    this.sqlstate = sqlstate;
    this.hint = hint;
    this.detail = detail;
  }
}

function wrap(err, op) {
  if (err instanceof MnemeError) return err;
  if (err && typeof err.code === 'string' && err.severity) {
    return new MnemeError(err.message, { op, sqlstate: err.code, hint: err.hint, detail: err.detail, cause: err });
  }
  return err;
}

const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
function row(r) {
  const o = {};
  for (const [k, v] of Object.entries(r)) o[camel(k)] = v;
  return o;
}
// bigint columns arrive as strings from pg: ids and counts are far below
// 2^53, so they become numbers.
const num = (v) => (v === null || v === undefined ? v : Number(v));

// call builds `SELECT ... FROM mneme.fn($1, $2, name => $3)` with only the
// options given, so the SQL defaults apply to the rest.
function call(fn, args, opts = {}, names = {}) {
  const params = [...args];
  const list = args.map((_, i) => `$${i + 1}`);
  for (const [k, v] of Object.entries(opts)) {
    if (!(k in names)) throw new TypeError(`${fn}: unknown option ${k} (known: ${Object.keys(names).join(', ')})`);
    if (v === undefined) continue;
    params.push(v);
    list.push(`${names[k]} => $${params.length}${names[k] === 'query_embedding' ? '::real[]' : ''}`);
  }
  return { text: `mneme.${fn}(${list.join(', ')})`, params };
}

const SEARCH_OPTS = {
  k: 'k', queryEmbedding: 'query_embedding', since: 'since', until: 'until', at: 'at',
  scope: 'scope', asOf: 'as_of', includeHistory: 'include_history',
};
const CONTEXT_OPTS = {
  budget: 'budget', queryEmbedding: 'query_embedding', since: 'since', until: 'until', at: 'at', scope: 'scope',
};
const REMEMBER_OPTS = {
  label: 'label', pinned: 'pinned', validUntil: 'valid_until', supersedes: 'supersedes', title: 'title',
  sourceRef: 'source_ref', at: 'at',
};

function retrieval(r) {
  const o = row(r);
  o.bm25Rank ??= null;
  o.vectorRank ??= null;
  return o;
}

/**
 * Mneme runs mneme's SQL functions on a pg.Pool or pg.Client. With a
 * tenant (withTenant), each call runs in a transaction that sets it first;
 * transaction() runs several calls in one.
 */
export class Mneme {
  #db;
  #tenant;
  #tx; // a pg client inside an open transaction

  constructor(db, { tenant } = {}, tx = undefined) {
    if (!db || typeof db.query !== 'function') throw new TypeError('Mneme: pass a pg.Pool or pg.Client');
    this.#db = db;
    this.#tenant = tenant ?? undefined;
    this.#tx = tx;
  }

  /**
   * connect checks the database's mneme SQL API version (mneme.version())
   * against SUPPORTED_API and returns a Mneme.
   */
  static async connect(db, options = {}) {
    const m = new Mneme(db, options);
    await m.checkVersion();
    return m;
  }

  /** The tenant calls run as (undefined: the login's bound tenant or `default`). */
  get tenant() {
    return this.#tenant;
  }

  /** A Mneme on the same pool whose calls run as tenant. */
  withTenant(tenant) {
    if (this.#tx) throw new MnemeError('withTenant inside a transaction: call setTenant', { sqlstate: '25001' });
    return new Mneme(this.#db, { tenant });
  }

  /** Sets the tenant for the rest of the open transaction (mneme.set_tenant). */
  async setTenant(tenant) {
    if (!this.#tx) {
      throw new MnemeError('setTenant outside a transaction: the tenant is transaction-local; use transaction() or withTenant()',
        { sqlstate: '25P01', hint: 'mneme.set_tenant lasts until the end of its transaction' });
    }
    await this.#query('set_tenant', 'SELECT mneme.set_tenant($1)', [tenant]);
  }

  /**
   * Runs fn with a Mneme bound to one connection in one transaction
   * (BEGIN, mneme.set_tenant when a tenant is chosen, fn, COMMIT; ROLLBACK
   * on an error). Nested calls run in the same transaction.
   */
  async transaction(fn) {
    if (this.#tx) return fn(this);
    const pooled = typeof this.#db.connect === 'function' && typeof this.#db.totalCount === 'number';
    const client = pooled ? await this.#db.connect() : this.#db;
    let broken;
    try {
      await client.query('BEGIN');
      try {
        const m = new Mneme(this.#db, { tenant: this.#tenant }, client);
        if (this.#tenant !== undefined) await m.setTenant(this.#tenant);
        const out = await fn(m);
        await client.query('COMMIT');
        return out;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch (e) {
          broken = e;
        }
        throw wrap(err, 'transaction');
      }
    } finally {
      if (pooled) client.release(broken);
    }
  }

  async #query(what, text, params) {
    try {
      if (this.#tx) return await this.#tx.query(text, params);
      if (this.#tenant !== undefined) return await this.transaction((m) => m.#query(what, text, params));
      return await this.#db.query(text, params);
    } catch (err) {
      throw wrap(err, what);
    }
  }

  async #scalar(what, c) {
    const r = await this.#query(what, `SELECT ${c.text} AS v`, c.params);
    return r.rows[0].v;
  }

  async #rows(what, c) {
    const r = await this.#query(what, `SELECT * FROM ${c.text}`, c.params);
    return r.rows;
  }

  /** mneme.version(): the SQL API's semantic version. */
  async version() {
    return this.#scalar('version', call('version', []));
  }

  /** Fails with a MnemeError unless the database's SQL API major is supported. */
  async checkVersion() {
    let v;
    try {
      v = await this.version();
    } catch (err) {
      if (err.sqlstate === '42883' || err.sqlstate === '3F000') {
        throw new MnemeError(`mneme.version() does not exist: the database is not migrated or its mneme is too old; this client supports SQL API ${SUPPORTED_API}`,
          { sqlstate: err.sqlstate, hint: 'run `mneme migrate` against this database', cause: err });
      }
      throw err;
    }
    const major = Number(String(v).split('.')[0]);
    if (major !== SUPPORTED_MAJOR) {
      throw new MnemeError(`mneme SQL API ${v} is not supported by @mneme-memory/client (supports ${SUPPORTED_API})`,
        { sqlstate: '0A000', hint: major > SUPPORTED_MAJOR ? 'upgrade @mneme-memory/client' : 'run `mneme migrate` with a newer mneme' });
    }
    return v;
  }

  /** mneme.add_message: appends a message; returns its id. */
  async addMessage(conversationId, role, content, { at } = {}) {
    return num(await this.#scalar('add_message', call('add_message', [conversationId, role, content], { at }, { at: 'at' })));
  }

  /**
   * mneme.pop_message: removes and returns the conversation's latest message while no memory holds it
   * (null when it has none); a message segmentation stored already is refused (55000, naming the memory).
   */
  async popMessage(conversationId) {
    const rows = await this.#rows('pop_message', call('pop_message', [conversationId]));
    return rows.length === 0 ? null : { ...row(rows[0]), messageId: num(rows[0].message_id) };
  }

  /** mneme.segment_now: the conversation is over, segment what is queued; returns the job id (or null). */
  async segmentNow(conversationId) {
    return num(await this.#scalar('segment_now', call('segment_now', [conversationId])));
  }

  /** mneme.remember: stores a fact; returns its memory id. */
  async remember(conversationId, content, options = {}) {
    return this.#scalar('remember', call('remember', [conversationId, content], options, REMEMBER_OPTS));
  }

  /** mneme.retrieve: hybrid retrieval that records a pending review. */
  async retrieve(conversationId, query, options = {}) {
    return (await this.#rows('retrieve', call('retrieve', [conversationId, query], options, SEARCH_OPTS))).map(retrieval);
  }

  /** mneme.search: retrieve without side effects. */
  async search(conversationId, query, options = {}) {
    return (await this.#rows('search', call('search', [conversationId, query], options, SEARCH_OPTS))).map(retrieval);
  }

  /** mneme.context: the memory for a prompt within a word budget (markdown); records a pending review unless record is false. */
  async context(conversationId, query, options = {}) {
    return this.#scalar('context', call('context', [conversationId, query], options, { ...CONTEXT_OPTS, record: 'record' }));
  }

  /** mneme.context_items: the items context would render, one row each (no side effects). */
  async contextItems(conversationId, query, options = {}) {
    return (await this.#rows('context_items', call('context_items', [conversationId, query], options, CONTEXT_OPTS)))
      .map((r) => ({ ...row(r), messageIds: (r.message_ids ?? []).map(Number) }));
  }

  /** mneme.forget: invalidates a memory with a reason (the row stays). */
  async forget(memoryId, reason) {
    await this.#query('forget', 'SELECT mneme.forget($1, $2)', [memoryId, reason]);
  }

  /** mneme.erase: deletes a memory and every copy of its words (mneme_admin). */
  async erase(memoryId, reason) {
    await this.#query('erase', 'SELECT mneme.erase($1, $2)', [memoryId, reason]);
  }

  /** mneme.erase_conversation: erases a whole conversation (mneme_admin); returns what it counts. */
  async eraseConversation(conversationId, reason) {
    return num(await this.#scalar('erase_conversation', call('erase_conversation', [conversationId, reason])));
  }

  /** mneme.pin. */
  async pin(memoryId) {
    await this.#query('pin', 'SELECT mneme.pin($1)', [memoryId]);
  }

  /** mneme.unpin. */
  async unpin(memoryId) {
    await this.#query('unpin', 'SELECT mneme.unpin($1)', [memoryId]);
  }

  /** mneme.inspect: one memory with its belief state and lineage links. */
  async inspect(memoryId) {
    const rows = await this.#rows('inspect', call('inspect', [memoryId]));
    const o = row(rows[0]);
    o.sourceMessageIds = (o.sourceMessageIds ?? []).map(Number);
    return o;
  }

  /** mneme.history: the memory's lineage both ways. */
  async history(memoryId) {
    return (await this.#rows('history', call('history', [memoryId]))).map(row);
  }

  /** mneme.conversation_messages: the conversation's messages in order. */
  async messages(conversationId) {
    return (await this.#rows('conversation_messages', call('conversation_messages', [conversationId])))
      .map((r) => ({ ...row(r), messageId: num(r.message_id), setAsideJobId: num(r.set_aside_job_id) }));
  }

  /** mneme.conversation_memories: the conversation's memories of every status. */
  async memories(conversationId) {
    return (await this.#rows('conversation_memories', call('conversation_memories', [conversationId])))
      .map((r) => ({ ...row(r), sourceMessageIds: (r.source_message_ids ?? []).map(Number) }));
  }

  /** mneme.conversations: the tenant's conversations, most recently active first. */
  async conversations({ k } = {}) {
    return (await this.#rows('conversations', call('conversations', [], { k }, { k: 'k' }))).map((r) => {
      const o = row(r);
      for (const f of ['messages', 'queuedMessages', 'memories', 'activeMemories', 'pendingJobs', 'failedJobs']) o[f] = num(o[f]);
      return o;
    });
  }

  /** mneme.hash_embed: the built-in embedder's vector for a text. */
  async hashEmbed(text) {
    return this.#scalar('hash_embed', { text: 'mneme.hash_embed($1::text)', params: [text] });
  }
}
