// The OpenAI Agents SDK: a session whose history is a mneme conversation.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Agent, run, setTracingDisabled } from '@openai/agents';
import { MnemeSession } from '@mneme-memory/client/agents';
import { agentsModel } from './scripted-models.mjs'; // leave `model` out for OpenAI's default

setTracingDisabled(true);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const session = new MnemeSession({ pool, tenant: process.env.MNEME_TENANT, conversation: randomUUID() });
const agent = new Agent({ name: 'assistant', instructions: 'Be brief.', model: agentsModel() });
await run(agent, 'My sister Alice lives in Lisbon.', { session }); // mneme.add_message, each item
console.log((await run(agent, 'Where does Alice live?', { session })).finalOutput);
await pool.end();
