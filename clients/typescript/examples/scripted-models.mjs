// Stand-ins for a real model, so the examples run offline in the tests:
// replace them with yours (for the AI SDK, e.g. openai('gpt-4o-mini') from
// @ai-sdk/openai; for the Agents SDK, leave `model` out for OpenAI's default).
import { MockLanguageModelV3 } from 'ai/test';
import { Usage } from '@openai/agents';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const stop = (unified) => ({ unified, raw: unified });

// aiModel calls one tool with input, then says what the tool returned.
export function aiModel(toolName, input) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const result = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).at(-1)?.output?.value;
      if (result === undefined) {
        return { content: [{ type: 'tool-call', toolCallId: 'c1', toolName, input: JSON.stringify(input) }], finishReason: stop('tool-calls'), usage, warnings: [] };
      }
      return { content: [{ type: 'text', text: typeof result === 'string' ? result : JSON.stringify(result) }], finishReason: stop('stop'), usage, warnings: [] };
    },
  });
}

// agentsModel answers a "Where" question from the conversation's history.
export function agentsModel() {
  const text = (i) => (typeof i.content === 'string' ? i.content : (i.content ?? []).map((p) => p.text ?? '').join(''));
  return {
    async getResponse({ input }) {
      const items = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
      const said = items.slice(0, -1).map(text).find((t) => t.includes('lives in'));
      const answer = text(items.at(-1)).startsWith('Where') ? `You told me: ${said}` : 'Noted.';
      return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: answer }] }] };
    },
    async *getStreamedResponse() {
      throw new Error('not streamed');
    },
  };
}
