// mneme's agent loop on @mneme-memory/client (docs/clients.md; tests/clients_test.go runs it):
//   npm ci   # in docs/clients: pg and the package (file:../../clients/typescript)
//   DATABASE_URL=postgres://my_app@localhost/mydb MNEME_TENANT=acme node loop.mjs
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Mneme } from '@mneme-memory/client';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const m = await Mneme.connect(pool, { tenant: process.env.MNEME_TENANT });
const conv = randomUUID(), query = 'where does Alice live?'; // a new conversation: any uuid
console.log('conversation', conv);
for (const [role, content] of [['user', 'Hi, I am planning a trip to see Alice.'], ['assistant', 'Where does she live these days?'], ['user', 'She moved to Lisbon last spring.']]) {
  await m.addMessage(conv, role, content);
}
console.log(`messages 3\nremembered ${await m.remember(conv, 'Alice lives in Lisbon')}`);
const [hit] = await m.search(conv, query);
console.log(`search: ${hit.content} (score ${hit.score.toFixed(4)})\ncontext:\n${await m.context(conv, query, { budget: 200 })}`);
try {
  await m.context(conv, query, { budget: -1 }); // a bad budget: MnemeError, SQLSTATE 22023; it changed nothing
} catch (err) {
  if (err.sqlstate !== '22023') throw err;
  console.log(`bad budget: ${err.sqlstate} ${err.message}`);
}
await pool.end();
