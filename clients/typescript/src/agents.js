// An OpenAI Agents SDK (@openai/agents) Session over one mneme
// conversation: the session's items are the conversation's messages
// (mneme.add_message, mneme.conversation_messages). Types: agents.d.ts.
import { Mneme } from './index.js';

const MESSAGE_ROLES = new Set(['user', 'assistant', 'system']);

function text(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => p.text ?? p.refusal ?? '').filter(Boolean).join('\n');
}

// toMessage: a message item is stored as its role and its text; any other
// item (a tool call, its result, reasoning) as role tool with the item's
// JSON, so a run's history comes back whole.
function toMessage(item) {
  if (MESSAGE_ROLES.has(item.role) && (item.type === undefined || item.type === 'message')) {
    return { role: item.role, content: text(item.content) };
  }
  return { role: 'tool', content: JSON.stringify(item) };
}

function toItem(msg) {
  if (msg.role === 'tool') {
    try {
      const item = JSON.parse(msg.content);
      if (item && typeof item === 'object' && typeof item.type === 'string') return item;
    } catch {
      // a tool message another client wrote: plain text below
    }
    return { role: 'system', content: msg.content };
  }
  if (msg.role === 'assistant') {
    return { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: msg.content }] };
  }
  if (msg.role === 'system') return { role: 'system', content: msg.content };
  return { role: 'user', content: msg.content }; // user, or a registered speaker's name
}

/**
 * MnemeSession is a Session of @openai/agents backed by one mneme
 * conversation. getItems and addItems read and append its messages;
 * popItem is mneme.pop_message: it removes and returns the latest item
 * while no memory holds it (once segmentation stored it, a MnemeError
 * 55000 names the memory to erase instead; nothing is removed); clearSession is
 * mneme.erase_conversation (an erase: the messages and every memory made
 * of them are deleted for good; it needs a mneme_admin login).
 */
export class MnemeSession {
  #m;
  #conv;
  #reason;

  constructor({ pool, mneme, tenant, conversation, clearReason }) {
    if (!conversation) throw new TypeError('MnemeSession: conversation (a uuid) is required');
    this.#m = mneme ?? new Mneme(pool, { tenant });
    this.#conv = conversation;
    this.#reason = clearReason ?? 'clearSession of an OpenAI Agents SDK session';
  }

  async getSessionId() {
    return this.#conv;
  }

  async getItems(limit) {
    const msgs = await this.#m.messages(this.#conv);
    const items = msgs.map(toItem);
    if (limit === undefined || limit === null) return items;
    if (limit <= 0) return [];
    return items.slice(-limit);
  }

  async addItems(items) {
    const msgs = items.map(toMessage).filter((m) => m.content.trim() !== '');
    if (msgs.length === 0) return;
    await this.#m.transaction(async (m) => {
      for (const msg of msgs) await m.addMessage(this.#conv, msg.role, msg.content);
    });
  }

  async popItem() {
    const msg = await this.#m.popMessage(this.#conv);
    return msg === null ? undefined : toItem(msg);
  }

  async clearSession() {
    await this.#m.eraseConversation(this.#conv, this.#reason);
  }
}
