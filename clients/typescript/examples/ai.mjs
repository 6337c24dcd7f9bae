// The AI SDK: mneme's tools for generateText, and the memory in a system prompt.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { generateText, stepCountIs } from 'ai';
import { mnemeTools, withMemory } from '@mneme-memory/client/ai';
import { aiModel } from './scripted-models.mjs'; // your model instead, e.g. openai('gpt-4o-mini')

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const opts = { pool, tenant: process.env.MNEME_TENANT, conversation: randomUUID() };
const tools = mnemeTools(opts); // remember, recall, forget
await generateText({ model: aiModel('remember', { content: 'Alice lives in Lisbon' }), tools,
  stopWhen: stepCountIs(3), prompt: 'My sister Alice lives in Lisbon.' });
const later = await generateText({ model: aiModel('recall', { query: 'where does Alice live?' }), tools,
  stopWhen: stepCountIs(3), prompt: 'Where does Alice live?' });
console.log(later.text);
console.log(await withMemory({ ...opts, query: 'where does Alice live?', system: 'You are helpful.' }));
await pool.end();
