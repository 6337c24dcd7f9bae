// MnemeStore: a LangGraph.js BaseStore over mneme. Namespaces are
// [tenant, conversation] or [tenant, conversation, label]; a key is a
// memory's title (or its id, for memories without one). put is
// mneme.remember (superseding the key's current memory), delete is
// mneme.forget (or mneme.erase), search with a query is mneme.search.
// docs/clients.md explains the mapping. Types: langgraph.d.ts.
import { BaseStore } from '@langchain/langgraph';
import { Mneme, MnemeError } from './index.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function parse(ns, what) {
  if (!Array.isArray(ns) || ns.length < 2 || ns.length > 3 || !UUID.test(ns[1] ?? '')) {
    throw new MnemeError(`${what}: a namespace is [tenant, conversation uuid] or [tenant, conversation uuid, label], got ${JSON.stringify(ns)}`,
      { sqlstate: '22023', hint: 'docs/clients.md, "LangGraph": namespaces map to tenants, conversations and labels' });
  }
  return { tenant: ns[0], conv: ns[1], label: ns[2] };
}

// A value { content: "text" } is stored as the text; any other value as
// its JSON.
function encode(value) {
  const keys = Object.keys(value);
  if (keys.length === 1 && typeof value.content === 'string') return value.content;
  return JSON.stringify(value);
}

function decode(content) {
  if (content.startsWith('{')) {
    try {
      const v = JSON.parse(content);
      if (v && typeof v === 'object' && !Array.isArray(v)) return v;
    } catch {
      // text that starts with a brace
    }
  }
  return { content };
}

function matches(value, filter) {
  if (!filter) return true;
  return Object.entries(filter).every(([k, v]) => JSON.stringify(value[k]) === JSON.stringify(v));
}

function pathMatches(ns, path, suffix) {
  if (path.length > ns.length) return false;
  const part = suffix ? ns.slice(ns.length - path.length) : ns.slice(0, path.length);
  return path.every((p, i) => p === '*' || p === part[i]);
}

export class MnemeStore extends BaseStore {
  #pool;
  #tenant;
  #erase;
  #reason;

  /**
   * pool: a pg.Pool (or Client). tenant: the tenant listNamespaces lists
   * when no match condition names one. deleteMode: 'forget' (default:
   * invalidated, kept with its history) or 'erase' (deleted for good,
   * mneme_admin).
   */
  constructor({ pool, tenant = 'default', deleteMode = 'forget', reason = 'deleted through the LangGraph store' }) {
    super();
    if (deleteMode !== 'forget' && deleteMode !== 'erase') throw new TypeError("deleteMode is 'forget' or 'erase'");
    this.#pool = pool;
    this.#tenant = tenant;
    this.#erase = deleteMode === 'erase';
    this.#reason = reason;
  }

  #mneme(tenant) {
    return new Mneme(this.#pool, { tenant });
  }

  async batch(operations) {
    const out = [];
    for (const op of operations) {
      if ('namespacePrefix' in op) out.push(await this.#search(op));
      else if ('value' in op) out.push(await this.#put(op));
      else if ('key' in op) out.push(await this.#get(op));
      else out.push(await this.#list(op));
    }
    return out;
  }

  // find: the active memory a key names in the conversation: its title,
  // or its id.
  async #find(m, conv, key, label) {
    const mems = await m.memories(conv);
    const hit = mems.filter((x) => x.status === 'active' && (x.title === key || x.memoryId === key) && (!label || x.label === label))
      .sort((a, b) => b.createdAt - a.createdAt)[0];
    return hit;
  }

  #item(ns, mem, score) {
    const item = { namespace: ns, key: mem.title ?? mem.memoryId, value: decode(mem.content), createdAt: mem.createdAt, updatedAt: mem.createdAt };
    if (score !== undefined) item.score = score;
    return item;
  }

  async #get({ namespace, key }) {
    const { tenant, conv, label } = parse(namespace, 'get');
    const mem = await this.#find(this.#mneme(tenant), conv, key, label);
    return mem ? this.#item(namespace, mem) : null;
  }

  async #put({ namespace, key, value }) {
    const { tenant, conv, label } = parse(namespace, value === null ? 'delete' : 'put');
    await this.#mneme(tenant).transaction(async (m) => {
      const old = await this.#find(m, conv, key, label);
      if (value === null) {
        if (!old) return;
        if (this.#erase) await m.erase(old.memoryId, this.#reason);
        else await m.forget(old.memoryId, this.#reason);
        return;
      }
      const content = encode(value);
      if (old && old.content === content) return;
      await m.remember(conv, content, { label, title: key, supersedes: old?.memoryId });
    });
  }

  async #search({ namespacePrefix, filter, limit = 10, offset = 0, query }) {
    const { tenant, conv, label } = parse(namespacePrefix, 'search');
    const m = this.#mneme(tenant);
    const ns = namespacePrefix.slice(0, 3);
    if (query) {
      const hits = await m.search(conv, query, { k: Math.min(100, limit + offset + (label || filter ? 50 : 0)) });
      return hits.filter((h) => (!label || h.label === label))
        .map((h) => this.#item(ns, h, h.score))
        .filter((it) => matches(it.value, filter))
        .slice(offset, offset + limit);
    }
    const mems = await m.memories(conv);
    return mems.filter((x) => x.status === 'active' && (!label || x.label === label))
      .sort((a, b) => b.createdAt - a.createdAt)
      .map((x) => this.#item(ns, x))
      .filter((it) => matches(it.value, filter))
      .slice(offset, offset + limit);
  }

  async #list({ matchConditions = [], maxDepth, limit = 100, offset = 0 }) {
    const named = matchConditions.find((c) => c.matchType === 'prefix' && c.path.length > 0 && c.path[0] !== '*');
    const tenant = named ? named.path[0] : this.#tenant;
    const m = this.#mneme(tenant);
    const seen = new Set();
    const all = [];
    const add = (ns) => {
      const cut = maxDepth === undefined ? ns : ns.slice(0, maxDepth);
      const k = JSON.stringify(cut);
      if (!seen.has(k)) {
        seen.add(k);
        all.push(cut);
      }
    };
    for (const c of await m.conversations({ k: 10000 })) {
      add([tenant, c.conversationId]);
      if (maxDepth === undefined || maxDepth >= 3) {
        const labels = new Set((await m.memories(c.conversationId)).filter((x) => x.status === 'active').map((x) => x.label));
        for (const l of [...labels].sort()) add([tenant, c.conversationId, l]);
      }
    }
    return all.filter((ns) => matchConditions.every((c) => pathMatches(ns, c.path, c.matchType === 'suffix')))
      .slice(offset, offset + limit);
  }
}
