// LangGraph.js with mneme as the graph's store.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { MnemeStore } from '@mneme-memory/client/langgraph';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const tenant = process.env.MNEME_TENANT ?? 'default';
const ns = [tenant, randomUUID(), 'user_profile']; // a namespace: tenant, conversation, label
const State = Annotation.Root({ input: Annotation(), answer: Annotation() });
const graph = new StateGraph(State)
  .addNode('agent', async ({ input }, { store }) => {
    if (input.startsWith('remember: ')) {
      await store.put(ns, 'home', { content: input.slice('remember: '.length) }); // mneme.remember
      return { answer: 'noted' };
    }
    const hits = await store.search(ns, { query: input, limit: 3 }); // mneme.search
    return { answer: hits.map((h) => h.value.content).join('; ') };
  })
  .addEdge(START, 'agent').addEdge('agent', END)
  .compile({ store: new MnemeStore({ pool, tenant }) });
await graph.invoke({ input: 'remember: Alice lives in Lisbon' });
console.log((await graph.invoke({ input: 'where does Alice live?' })).answer); // a later turn
await pool.end();
