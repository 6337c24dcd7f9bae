import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, Usage, run, setTracingDisabled } from '@openai/agents';
import { Mneme, MnemeError } from '../src/index.js';
import { MnemeSession } from '../src/agents.js';
import { adminPool, closeAll, newConversation, pool, tenant } from './helpers.mjs';

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

test('MnemeSession: tool items round-trip, popItem is refused, clearSession erases', async () => {
  const conv = newConversation();
  const session = new MnemeSession({ pool: pool(), tenant, conversation: conv });
  const call = { type: 'function_call', callId: 'c1', name: 'lookup', arguments: '{"q":"Alice"}', status: 'completed' };
  const result = { type: 'function_call_result', callId: 'c1', name: 'lookup', status: 'completed', output: { type: 'text', text: 'Lisbon' } };
  await session.addItems([{ role: 'user', content: [{ type: 'input_text', text: 'Where is Alice?' }] }, call, result, { role: 'system', content: 'be brief' }]);
  assert.deepEqual(await session.getItems(), [{ role: 'user', content: 'Where is Alice?' }, call, result, { role: 'system', content: 'be brief' }]);

  await assert.rejects(session.popItem(), (e) => e instanceof MnemeError && e.sqlstate === '0A000' && /append-only/.test(e.message));
  assert.equal((await session.getItems()).length, 4);
  // clearSession is an erase: the login needs mneme_admin.
  await assert.rejects(session.clearSession(), (e) => e instanceof MnemeError && e.sqlstate === '42501');
  await new MnemeSession({ pool: adminPool(), tenant, conversation: conv }).clearSession();
  assert.deepEqual(await session.getItems(), []);
  // Bad input: an unknown tenant.
  await assert.rejects(new MnemeSession({ pool: pool(), tenant: 'nobody', conversation: conv }).addItems([{ role: 'user', content: 'hi' }]),
    (e) => e instanceof MnemeError && e.sqlstate === '22023');
});
