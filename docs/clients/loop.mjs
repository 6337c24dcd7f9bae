// mneme's agent loop in Node with node-postgres (pg): a new conversation, a
// few messages, one explicit memory, then search, retrieve and the context
// for a prompt inside one set_tenant transaction. docs/clients.md explains
// it; tests/clients_test.go runs it.
//
//   npm ci   # in docs/clients: installs pg
//   DATABASE_URL=postgres://my_app@localhost/mydb MNEME_TENANT=acme node loop.mjs
//
// pg runs a query with parameters as an unnamed statement unless given a
// name: without names the program also runs behind PgBouncer before 1.21
// in transaction pooling.
import { randomUUID } from 'node:crypto';
import pg from 'pg';

const query = 'where does Alice live?';
const tenant = process.env.MNEME_TENANT || 'default';
const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();

// set_tenant is transaction-local: every call that needs the tenant runs
// inside the transaction that set it; ROLLBACK on any error.
async function inTenant(fn) {
  await client.query('BEGIN');
  try {
    await client.query('SELECT mneme.set_tenant($1)', [tenant]);
    const out = await fn();
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

try {
  const conv = randomUUID(); // a new conversation: a uuid is passed as its string
  console.log('conversation', conv);
  await inTenant(async () => {
    for (const [role, content] of [
      ['user', 'Hi, I am planning a trip to see Alice.'],
      ['assistant', 'Where does she live these days?'],
      ['user', 'She moved to Lisbon last spring.'],
    ]) {
      await client.query('SELECT mneme.add_message($1, $2, $3)', [conv, role, content]);
    }
    console.log('messages 3');
    const { rows: [{ id }] } = await client.query('SELECT mneme.remember($1, $2) AS id', [conv, 'Alice lives in Lisbon']);
    console.log('remembered', id);

    const search = await client.query('SELECT content, score FROM mneme.search($1, $2, 5)', [conv, query]);
    for (const r of search.rows) {
      console.log(`search: ${r.content} (score ${r.score.toFixed(4)})`);
    }

    // A query embedding is a real[] (an array of numbers): an application
    // passes its model's vector; here the built-in embedder's. pg reads a
    // real[] as an array of numbers and sends an array as an array literal.
    const { rows: [{ embedding }] } = await client.query('SELECT mneme.hash_embed($1) AS embedding', [query]);
    const retrieved = await client.query(
      'SELECT content, vector_rank FROM mneme.retrieve($1, $2, 5, $3)', [conv, query, embedding]);
    for (const r of retrieved.rows) {
      const rank = r.vector_rank ?? 'none'; // NULL: not a vector candidate
      console.log(`retrieve: ${r.content} (vector rank ${rank} of a ${embedding.length}-number embedding)`);
    }

    const { rows: [{ context }] } = await client.query('SELECT mneme.context($1, $2, 200) AS context', [conv, query]);
    console.log(`context:\n${context}`);
  });

  // mneme's errors carry an SQLSTATE in err.code: 22023 is a bad argument,
  // here a budget of 0 words. The failed call changed nothing.
  try {
    await inTenant(() => client.query('SELECT mneme.context($1, $2, 0)', [conv, query]));
    throw new Error('context with a budget of 0 succeeded: want 22023');
  } catch (err) {
    if (err.code !== '22023') throw err;
    console.log(`bad budget: ${err.code} ${err.message}`);
  }
} finally {
  await client.end();
}
