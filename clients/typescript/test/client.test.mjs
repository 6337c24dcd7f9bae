import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { Mneme, MnemeError, SUPPORTED_API } from '../src/index.js';
import { adminPool, closeAll, newConversation, pool, tenant } from './helpers.mjs';

after(closeAll);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function rejectsWith(promise, sqlstate, message) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof MnemeError, `want a MnemeError, got ${err}`);
    assert.equal(err.sqlstate, sqlstate, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

test('connect checks the SQL API version', async () => {
  const m = await Mneme.connect(pool(), { tenant });
  assert.equal(await m.version(), '1.0.0');
  assert.equal(SUPPORTED_API, '>=1.0.0 <2.0.0');
  const empty = pool(process.env.MNEME_EMPTY_URL, 1);
  await assert.rejects(Mneme.connect(empty), (err) => err instanceof MnemeError && /not migrated or its mneme is too old/.test(err.message) && err.hint.includes('mneme migrate'));
  const v2 = pool(process.env.MNEME_V2_URL, 1);
  await assert.rejects(Mneme.connect(v2), (err) => err instanceof MnemeError && /mneme SQL API 2\.0\.0 is not supported .*>=1\.0\.0 <2\.0\.0/.test(err.message) && /upgrade @mneme-memory\/client/.test(err.hint));
});

test('every function of the SQL API', async () => {
  const m = new Mneme(pool()).withTenant(tenant);
  const conv = newConversation();
  const ids = [];
  for (const [role, content] of [['user', 'Hi, I am planning a trip to see Alice.'], ['assistant', 'Where does she live these days?'], ['user', 'She moved to Lisbon last spring.']]) {
    ids.push(await m.addMessage(conv, role, content));
  }
  assert.ok(ids.every((id) => Number.isInteger(id)) && ids[0] < ids[1] && ids[1] < ids[2], String(ids));
  const msgs = await m.messages(conv);
  assert.deepEqual(msgs.map((x) => [x.messageId, x.role, x.content]), [[ids[0], 'user', 'Hi, I am planning a trip to see Alice.'], [ids[1], 'assistant', 'Where does she live these days?'], [ids[2], 'user', 'She moved to Lisbon last spring.']]);
  assert.ok(msgs[0].createdAt instanceof Date);
  // popMessage takes back the latest message and returns it; added again, it is the same.
  const popped = await m.popMessage(conv);
  assert.deepEqual([popped.messageId, popped.role, popped.content], [ids[2], 'user', 'She moved to Lisbon last spring.']);
  assert.ok(popped.createdAt instanceof Date);
  assert.equal((await m.messages(conv)).length, 2);
  ids[2] = await m.addMessage(conv, 'user', 'She moved to Lisbon last spring.');
  assert.equal(await m.popMessage(newConversation()), null, 'an unknown conversation pops nothing');
  await assert.rejects(m.popMessage(null), (e) => e instanceof MnemeError && e.sqlstate === '22004');

  const id = await m.remember(conv, 'Alice lives in Lisbon', { label: 'user_profile', title: 'alice-home' });
  assert.match(id, UUID);
  const hits = await m.search(conv, 'where does Alice live?');
  assert.equal(hits.length, 1);
  assert.equal(hits[0].memoryId, id);
  assert.equal(hits[0].content, 'Alice lives in Lisbon');
  assert.equal(hits[0].label, 'user_profile');
  assert.equal(hits[0].title, 'alice-home');
  assert.equal(hits[0].kind, 'semantic');
  assert.equal(hits[0].status, 'active');
  assert.equal(typeof hits[0].score, 'number');
  assert.equal(hits[0].bm25Rank, 1);

  const embedding = await m.hashEmbed('where does Alice live?');
  assert.equal(embedding.length, 256);
  const got = await m.retrieve(conv, 'where does Alice live?', { k: 3, queryEmbedding: embedding });
  assert.deepEqual(got.map((r) => [r.memoryId, r.vectorRank]), [[id, 1]]);

  assert.equal(await m.context(conv, 'where does Alice live?', { budget: 200 }), '- Alice lives in Lisbon');
  assert.match(await m.context(conv, 'where does Alice live?', { budget: 200, record: false, scope: 'tenant' }), /^- Alice lives in Lisbon/);
  const items = await m.contextItems(conv, 'where does Alice live?', { budget: 200 });
  assert.equal(items.length, 1);
  assert.equal(items[0].memoryId, id);
  assert.match(items[0].text, /Alice lives in Lisbon/);
  assert.ok(items[0].words > 0 && items[0].kind === 'semantic');

  await m.pin(id);
  assert.equal((await m.inspect(id)).pinned, true);
  await m.unpin(id);
  const ins = await m.inspect(id);
  assert.equal(ins.pinned, false);
  assert.equal(ins.conversationId, conv);
  assert.equal(ins.sourceType, 'explicit');

  const newer = await m.remember(conv, 'Alice lives in Porto', { supersedes: id, at: new Date() });
  const hist = await m.history(newer);
  assert.deepEqual(hist.map((h) => [h.memoryId, h.status]).sort(), [[id, 'superseded'], [newer, 'active']].sort());
  await m.forget(newer, 'the user said it was wrong');
  const forgotten = await m.inspect(newer);
  assert.equal(forgotten.status, 'invalidated');
  assert.equal(forgotten.statusReason, 'the user said it was wrong');
  assert.equal((await m.memories(conv)).length, 2);
  assert.equal(typeof (await m.segmentNow(conv)), 'number');
  const convs = await m.conversations({ k: 1000 });
  assert.ok(convs.some((c) => c.conversationId === conv && c.messages === 3));

  // erase and erase_conversation are mneme_admin's.
  await rejectsWith(m.erase(id, 'right to be forgotten'), '42501');
  const admin = new Mneme(adminPool()).withTenant(tenant);
  await admin.erase(id, 'right to be forgotten');
  await rejectsWith(m.inspect(id), 'P0002');
  assert.equal(await admin.eraseConversation(conv, 'account closed'), 1);
  assert.deepEqual(await m.messages(conv), []);
});

test('bad input is a MnemeError with SQLSTATE and hint, and writes nothing', async () => {
  const m = new Mneme(pool(), { tenant });
  const conv = newConversation();
  await m.addMessage(conv, 'user', 'hello there');
  await assert.rejects(m.context(conv, 'x', { budget: 0 }), (err) => {
    assert.ok(err instanceof MnemeError);
    assert.equal(err.sqlstate, '22023');
    assert.equal(err.message, 'budget must be 1 to 100000 words, got 0');
    assert.equal(err.op, 'context');
    assert.match(err.hint, /the budget is the most words/);
    assert.equal(err.cause.code, '22023');
    return true;
  });
  await rejectsWith(m.addMessage(conv, 'user', null), '22004', /message content must not be NULL/);
  await rejectsWith(m.addMessage(conv, 'robot', 'hi'), '22023', /unknown role/);
  await rejectsWith(m.remember(conv, 'x', { label: 'nonsense' }), '22023');
  await rejectsWith(m.inspect('00000000-0000-4000-8000-000000000000'), 'P0002');
  await rejectsWith(m.addMessage('not-a-uuid', 'user', 'hi'), '22P02');
  await rejectsWith(m.setTenant('acme'), '25P01');
  await assert.rejects(m.context(conv, 'x', { budgte: 200 }), /context: unknown option budgte \(known: budget, /);
  await rejectsWith(m.withTenant('nobody').search(conv, 'x'), '22023');
  // A failed transaction rolls back what it wrote before the error.
  await assert.rejects(m.transaction(async (tx) => {
    await tx.addMessage(conv, 'user', 'this one is rolled back');
    await tx.context(conv, 'x', { budget: 0 });
  }), MnemeError);
  assert.equal((await m.messages(conv)).length, 1);
});

test('tenants: withTenant and transaction with setTenant', async () => {
  const p = pool();
  const acme = new Mneme(p, { tenant });
  const conv = newConversation();
  const id = await acme.transaction(async (tx) => {
    await tx.addMessage(conv, 'user', 'I am in acme');
    return tx.remember(conv, 'Bob works at acme');
  });
  assert.equal((await acme.search(conv, 'where does Bob work')).length, 1);
  // The default tenant does not see acme's conversation.
  assert.deepEqual(await new Mneme(p).search(conv, 'where does Bob work'), []);
  await rejectsWith(new Mneme(p).inspect(id), 'P0002');
  // setTenant inside a transaction switches for the rest of it.
  const seen = await new Mneme(p).transaction(async (tx) => {
    await tx.setTenant(tenant);
    return tx.search(conv, 'where does Bob work');
  });
  assert.equal(seen.length, 1);
  // A pg.Client works as well as a pool.
  const c = new pg.Client({ connectionString: process.env.MNEME_APP_URL });
  await c.connect();
  try {
    assert.equal((await new Mneme(c, { tenant }).search(conv, 'Bob')).length, 1);
  } finally {
    await c.end();
  }
});

test('two tenants at once on one pool stay apart', async () => {
  const p = pool(process.env.MNEME_APP_URL, 3);
  const a = new Mneme(p, { tenant });
  const d = new Mneme(p);
  const ca = newConversation();
  const cd = newConversation();
  await Promise.all(Array.from({ length: 10 }, (_, i) => Promise.all([
    a.remember(ca, `acme fact number ${i}`),
    d.remember(cd, `default fact number ${i}`),
  ])));
  const inA = await a.search(ca, 'fact number', { k: 20 });
  const inD = await d.search(cd, 'fact number', { k: 20 });
  assert.equal(inA.length, 10);
  assert.ok(inA.every((r) => r.content.startsWith('acme')));
  assert.equal(inD.length, 10);
  assert.ok(inD.every((r) => r.content.startsWith('default')));
});
