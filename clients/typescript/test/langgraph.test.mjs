import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { Mneme, MnemeError } from '../src/index.js';
import { MnemeStore } from '../src/langgraph.js';
import { adminPool, closeAll, newConversation, pool, tenant } from './helpers.mjs';

after(closeAll);

// A graph whose node remembers what the user says through the store, and
// in a later turn (another invocation) answers from a store search.
test('a LangGraph graph writes and searches through MnemeStore', async () => {
  const store = new MnemeStore({ pool: pool(), tenant });
  const conv = newConversation();
  const State = Annotation.Root({
    input: Annotation(),
    answer: Annotation(),
  });
  const graph = new StateGraph(State)
    .addNode('agent', async (state, config) => {
      const ns = [tenant, conv, 'user_profile'];
      if (state.input.startsWith('remember: ')) {
        await config.store.put(ns, 'home', { content: state.input.slice('remember: '.length) });
        return { answer: 'noted' };
      }
      const hits = await config.store.search(ns, { query: state.input, limit: 3 });
      return { answer: hits.map((h) => h.value.content).join('; ') || 'I do not know' };
    })
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ store });

  assert.equal((await graph.invoke({ input: 'remember: Alice lives in Lisbon' })).answer, 'noted');
  assert.equal((await graph.invoke({ input: 'where does Alice live?' })).answer, 'Alice lives in Lisbon');
  // What the store wrote is a mneme memory with the namespace's label and the key as its title.
  const [hit] = await new Mneme(pool(), { tenant }).search(conv, 'Alice');
  assert.deepEqual([hit.content, hit.label, hit.title], ['Alice lives in Lisbon', 'user_profile', 'home']);
});

test('MnemeStore: get, put (supersede), search, filter, delete, listNamespaces', async () => {
  const p = pool();
  const store = new MnemeStore({ pool: p, tenant });
  const m = new Mneme(p, { tenant });
  const conv = newConversation();
  const ns = [tenant, conv];
  assert.equal(await store.get(ns, 'home'), null);
  await store.put(ns, 'home', { content: 'Alice lives in Lisbon' });
  const first = await store.get(ns, 'home');
  assert.deepEqual(first.value, { content: 'Alice lives in Lisbon' });
  assert.deepEqual([first.key, first.namespace], ['home', ns]);
  assert.ok(first.createdAt instanceof Date);

  // A second put of the key supersedes the first memory (its lineage stays).
  await store.put(ns, 'home', { content: 'Alice lives in Porto' });
  assert.deepEqual((await store.get(ns, 'home')).value, { content: 'Alice lives in Porto' });
  const [cur] = await m.search(conv, 'Alice Porto');
  assert.deepEqual((await m.history(cur.memoryId)).map((h) => h.status).sort(), ['active', 'superseded']);
  // The same value again writes nothing.
  await store.put(ns, 'home', { content: 'Alice lives in Porto' });
  assert.equal((await m.memories(conv)).length, 2);

  // Any other value is stored as JSON and comes back as it was.
  await store.put([tenant, conv, 'general'], 'prefs', { food: 'pizza', likes: ['jazz'] });
  assert.deepEqual((await store.get(ns, 'prefs')).value, { food: 'pizza', likes: ['jazz'] });
  const found = await store.search(ns, { query: 'pizza' });
  assert.equal(found[0].key, 'prefs'); // the best match first (the vector leg may add the rest)
  assert.equal(typeof found[0].score, 'number');
  assert.deepEqual((await store.search(ns, { filter: { food: 'pizza' } })).map((f) => f.key), ['prefs']);
  assert.ok((await store.search([tenant, conv, 'general'])).every((f) => f.namespace[2] === 'general'));
  assert.deepEqual((await store.search([tenant, conv, 'important'])), []);
  assert.deepEqual((await store.search(ns, { limit: 1, offset: 1 })).length, 1);

  const spaces = await store.listNamespaces({ prefix: [tenant, conv] });
  assert.deepEqual(spaces, [[tenant, conv], [tenant, conv, 'general']]);
  assert.deepEqual(await store.listNamespaces({ prefix: [tenant, conv], maxDepth: 2 }), [[tenant, conv]]);
  assert.ok((await store.listNamespaces({ suffix: ['general'] })).some((s) => s[1] === conv));

  // delete is forget: the memory stays, invalidated, with the reason.
  await store.delete(ns, 'home');
  assert.equal(await store.get(ns, 'home'), null);
  assert.deepEqual((await m.inspect(cur.memoryId)).status, 'invalidated');

  // erase mode deletes for good (mneme_admin).
  const admin = new MnemeStore({ pool: adminPool(), tenant, deleteMode: 'erase' });
  const prefs = await store.search(ns, { query: 'pizza' });
  await admin.delete(ns, 'prefs');
  const id = (await m.memories(conv)).find((x) => x.title === 'prefs');
  assert.equal(id, undefined);
  assert.equal(prefs[0].key, 'prefs');
});

test('MnemeStore: a bad namespace or value is a MnemeError', async () => {
  const store = new MnemeStore({ pool: pool(), tenant });
  await assert.rejects(store.get(['users', 'alice'], 'k'), (e) => e instanceof MnemeError && e.sqlstate === '22023' && /namespace is \[tenant, conversation uuid\]/.test(e.message));
  await assert.rejects(store.put([tenant, newConversation(), 'nonsense'], 'k', { content: 'x' }), (e) => e instanceof MnemeError && e.sqlstate === '22023');
  await assert.rejects(store.put([tenant, newConversation()], 'k', { content: ' ' }), (e) => e instanceof MnemeError && e.sqlstate === '22023');
});
