import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Mneme } from '../src/index.js';
import { mnemeTools, withMemory } from '../src/ai.js';
import { closeAll, newConversation, pool, tenant } from './helpers.mjs';

after(closeAll);

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };
const toolCall = (toolName, input) => ({
  content: [{ type: 'tool-call', toolCallId: `call-${toolName}`, toolName, input: JSON.stringify(input) }],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
});
const say = (text) => ({ content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] });

// The text of the last tool result in a prompt (what the model was told).
function lastToolResult(prompt) {
  const parts = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content);
  const out = parts.at(-1)?.output;
  return out?.type === 'json' ? out.value : out?.value;
}

// A scripted model: each turn it calls one tool, then answers from what
// the tool returned.
function scripted(call) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const result = lastToolResult(prompt);
      if (result === undefined) return toolCall(...call);
      return say(`tool said: ${JSON.stringify(result)}`);
    },
  });
}

test('generateText with mnemeTools: remember in one turn, recall in a later one', async () => {
  const p = pool();
  const conv = newConversation();
  const tools = mnemeTools({ pool: p, tenant, conversation: conv, budget: 200 });
  assert.deepEqual(Object.keys(tools).sort(), ['forget', 'recall', 'remember']);

  const first = await generateText({
    model: scripted(['remember', { content: 'Alice lives in Lisbon', label: 'user_profile' }]),
    tools, stopWhen: stepCountIs(3), prompt: 'My sister Alice lives in Lisbon.',
  });
  const memoryId = first.steps[0].toolResults[0].output.memoryId;
  assert.match(memoryId, /^[0-9a-f-]{36}$/);
  assert.match(first.text, /memoryId/);

  const later = await generateText({
    model: scripted(['recall', { query: 'where does Alice live?' }]),
    tools, stopWhen: stepCountIs(3), prompt: 'Where does Alice live?',
  });
  assert.equal(later.text, 'tool said: {"context":"- Alice lives in Lisbon"}');

  const forgot = await generateText({
    model: scripted(['forget', { memoryId, reason: 'the user moved her' }]),
    tools, stopWhen: stepCountIs(3), prompt: 'Forget where Alice lives.',
  });
  assert.equal(forgot.text, 'tool said: {"ok":true}');
  assert.equal((await new Mneme(p, { tenant }).inspect(memoryId)).status, 'invalidated');

  const nothing = await generateText({
    model: scripted(['recall', { query: 'where does Alice live?' }]),
    tools, stopWhen: stepCountIs(3), prompt: 'Where does Alice live?',
  });
  assert.equal(nothing.text, 'tool said: {"context":"(nothing remembered matches)"}');
});

test('a tool call with bad input reaches the model as the MnemeError', async () => {
  const conv = newConversation();
  const tools = mnemeTools({ pool: pool(), tenant, conversation: conv });
  const r = await generateText({
    model: scripted(['remember', { content: 'x', label: 'nonsense' }]),
    tools, stopWhen: stepCountIs(3), prompt: 'remember this',
  });
  const err = r.steps[0].content.find((c) => c.type === 'tool-error');
  assert.ok(err, JSON.stringify(r.steps[0].content));
  assert.equal(err.error.name, 'MnemeError');
  assert.equal(err.error.sqlstate, '22023');
});

test('withMemory puts mneme.context into the system prompt', async () => {
  const p = pool();
  const conv = newConversation();
  await new Mneme(p, { tenant }).remember(conv, 'Alice lives in Lisbon');
  const system = await withMemory({ pool: p, tenant, conversation: conv, query: 'where does Alice live?', system: 'You are helpful.' });
  assert.equal(system, 'You are helpful.\n\n## What you remember\n\n- Alice lives in Lisbon');
  let seen;
  const model = new MockLanguageModelV3({ doGenerate: async ({ prompt }) => { seen = prompt[0]; return say('Lisbon'); } });
  await generateText({ model, system, prompt: 'Where does Alice live?' });
  assert.deepEqual(seen, { role: 'system', content: system });
  assert.equal(await withMemory({ pool: p, tenant, conversation: newConversation(), query: 'x', system: 'S' }), 'S');
});
