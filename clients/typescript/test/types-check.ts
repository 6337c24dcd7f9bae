// Compiled (not run) by test/types.test.mjs with tsc --noEmit: the .d.ts
// files describe what src/ exports, and the adapters fit their frameworks'
// types (a MnemeStore is a BaseStore, a MnemeSession a Session, the tools
// a ToolSet).
import pg from 'pg';
import type { BaseStore } from '@langchain/langgraph';
import type { Session } from '@openai/agents';
import type { ToolSet } from 'ai';
import { Mneme, MnemeError, SUPPORTED_API, type Retrieval, type Inspection } from '@mneme-memory/client';
import { MnemeStore } from '@mneme-memory/client/langgraph';
import { mnemeTools, withMemory } from '@mneme-memory/client/ai';
import { MnemeSession } from '@mneme-memory/client/agents';

export async function check(pool: pg.Pool): Promise<void> {
  const m: Mneme = await Mneme.connect(pool, { tenant: 'acme' });
  const conv = '00000000-0000-4000-8000-000000000001';
  const id: number = await m.addMessage(conv, 'user', 'hi', { at: new Date() });
  const mem: string = await m.remember(conv, 'Alice lives in Lisbon', { label: 'user_profile', supersedes: undefined });
  const hits: Retrieval[] = await m.search(conv, 'Alice', { k: 3, queryEmbedding: [0.1], scope: 'tenant' });
  const rank: number | null = hits[0].vectorRank;
  const ctx: string = await m.context(conv, 'Alice', { budget: 200, record: false });
  const ins: Inspection = await m.inspect(mem);
  await m.transaction(async (tx) => { await tx.setTenant('acme'); await tx.forget(mem, 'why'); });
  const n: number = await m.withTenant('acme').eraseConversation(conv, 'why');
  const v: string = SUPPORTED_API;
  try { await m.pin(mem); } catch (e) { if (e instanceof MnemeError) { const s: string | undefined = e.sqlstate; void s; } }
  const store: BaseStore = new MnemeStore({ pool, tenant: 'acme', deleteMode: 'erase' });
  const session: Session = new MnemeSession({ pool, tenant: 'acme', conversation: conv });
  const tools: ToolSet = mnemeTools({ pool, conversation: conv });
  const system: string = await withMemory({ pool, conversation: conv, query: 'x', system: 'S' });
  void [id, rank, ctx, ins, n, v, store, session, tools, system];
}
