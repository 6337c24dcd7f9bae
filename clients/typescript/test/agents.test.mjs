import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, Usage, run, setTracingDisabled } from '@openai/agents';
import { Mneme, MnemeError } from '../src/index.js';
import { MnemeSession } from '../src/agents.js';
import { adminPool, closeAll, newConversation, pool, tenant, workerPool } from './helpers.mjs';

after(closeAll);
setTracingDisabled(true);

const textOf = (item) => (typeof item.content === 'string' ? item.content : (item.content ?? []).map((p) => p.text ?? '').join(''));

// A fake model: it answers "where" questions from the history the runner
// gives it (what the session returned), and acknowledges anything else.
class HistoryModel {
  constructor() {
    this.inputs = [];
  }

  async getResponse(request) {
    const input = typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input;
    this.inputs.push(input);
    const last = textOf(input.at(-1));
    let answer = 'Noted.';
    if (last.startsWith('Where')) {
      const said = input.slice(0, -1).map(textOf).find((t) => /lives in/.test(t));
      answer = said ? `You told me: ${said}` : 'I do not know.';
    }
    return {
      usage: new Usage(),
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: answer }] }],
    };
  }

  async *getStreamedResponse() {
    throw new Error('not streamed in this test');
  }
}

test('an Agents SDK run keeps its history in mneme and recalls it in a later turn', async () => {
  const p = pool();
  const conv = newConversation();
  const session = new MnemeSession({ pool: p, tenant, conversation: conv });
  assert.equal(await session.getSessionId(), conv);
  const model = new HistoryModel();
  const agent = new Agent({ name: 'assistant', instructions: 'Be brief.', model });

  const first = await run(agent, 'My sister Alice lives in Lisbon.', { session });
  assert.equal(first.finalOutput, 'Noted.');
  const later = await run(agent, 'Where does Alice live?', { session });
  assert.equal(later.finalOutput, 'You told me: My sister Alice lives in Lisbon.');
  // The second call saw the first turn, read back from mneme.
  assert.deepEqual(model.inputs[1].map(textOf), ['My sister Alice lives in Lisbon.', 'Noted.', 'Where does Alice live?']);

  const msgs = await new Mneme(p, { tenant }).messages(conv);
  assert.deepEqual(msgs.map((m) => [m.role, m.content]), [
    ['user', 'My sister Alice lives in Lisbon.'], ['assistant', 'Noted.'],
    ['user', 'Where does Alice live?'], ['assistant', 'You told me: My sister Alice lives in Lisbon.'],
  ]);
  const items = await session.getItems(2);
  assert.deepEqual(items, [
    { role: 'user', content: 'Where does Alice live?' },
    { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'You told me: My sister Alice lives in Lisbon.' }] },
  ]);
  assert.equal((await session.getItems()).length, 4);
  assert.deepEqual(await session.getItems(0), []);
});

// popItem through the SDK's own contract: the runner stores a turn, popItem
// takes back the latest item (mneme.pop_message) and returns it as the
// item the session stored; the next run's model sees the history without
// it. Once segmentation stored the message in an episode, popItem is
// refused (55000, naming the episode) and nothing is removed.
test('MnemeSession: popItem takes back the latest item, then refuses once an episode holds it', async () => {
  const p = pool();
  const conv = newConversation();
  const session = new MnemeSession({ pool: p, tenant, conversation: conv });
  const model = new HistoryModel();
  const agent = new Agent({ name: 'assistant', instructions: 'Be brief.', model });
  assert.equal(await session.popItem(), undefined, 'an empty session pops nothing');

  await run(agent, 'My sister Alice lives in Lisbon.', { session });
  await run(agent, 'Oops, wrong chat.', { session });
  const popped = await session.popItem();
  assert.deepEqual(popped, { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Noted.' }] });
  assert.deepEqual(await session.popItem(), { role: 'user', content: 'Oops, wrong chat.' });
  const later = await run(agent, 'Where does Alice live?', { session });
  assert.equal(later.finalOutput, 'You told me: My sister Alice lives in Lisbon.');
  assert.deepEqual(model.inputs.at(-1).map(textOf), ['My sister Alice lives in Lisbon.', 'Noted.', 'Where does Alice live?'],
    'the popped turn is gone from the history the model sees');

  // The sidecar stores the messages in an episode (as a mneme_worker login would).
  const w = workerPool();
  const msgs = await new Mneme(p, { tenant }).messages(conv);
  const { rows } = await w.query(
    `SELECT mneme.create_episode($1, $2::bigint[], 'user: Alice lives in Lisbon.', 'Alice', NULL, 0.1, 'general', false, 5, 5) AS id`,
    [conv, msgs.map((m) => m.messageId)]);
  await assert.rejects(session.popItem(), (e) => e instanceof MnemeError && e.sqlstate === '55000' && e.message.includes(rows[0].id)
    && /mneme\.erase/.test(e.hint));
  assert.equal((await session.getItems()).length, msgs.length, 'a refused pop removes nothing');
});

test('MnemeSession: tool items round-trip, popItem pops a tool item, clearSession erases', async () => {
  const conv = newConversation();
  const session = new MnemeSession({ pool: pool(), tenant, conversation: conv });
  const call = { type: 'function_call', callId: 'c1', name: 'lookup', arguments: '{"q":"Alice"}', status: 'completed' };
  const result = { type: 'function_call_result', callId: 'c1', name: 'lookup', status: 'completed', output: { type: 'text', text: 'Lisbon' } };
  await session.addItems([{ role: 'user', content: [{ type: 'input_text', text: 'Where is Alice?' }] }, call, result, { role: 'system', content: 'be brief' }]);
  assert.deepEqual(await session.getItems(), [{ role: 'user', content: 'Where is Alice?' }, call, result, { role: 'system', content: 'be brief' }]);

  assert.deepEqual(await session.popItem(), { role: 'system', content: 'be brief' });
  assert.deepEqual(await session.popItem(), result, 'a tool result comes back as the item it was');
  await session.addItems([result, { role: 'system', content: 'be brief' }]);
  assert.equal((await session.getItems()).length, 4);
  // clearSession is an erase: the login needs mneme_admin.
  await assert.rejects(session.clearSession(), (e) => e instanceof MnemeError && e.sqlstate === '42501');
  await new MnemeSession({ pool: adminPool(), tenant, conversation: conv }).clearSession();
  assert.deepEqual(await session.getItems(), []);
  // Bad input: an unknown tenant.
  await assert.rejects(new MnemeSession({ pool: pool(), tenant: 'nobody', conversation: conv }).addItems([{ role: 'user', content: 'hi' }]),
    (e) => e instanceof MnemeError && e.sqlstate === '22023');
});
