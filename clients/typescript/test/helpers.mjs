// Shared by the tests: pools from the URLs the Go test passes
// (tests/clients_typescript_test.go) and the tenant they run as.
import { randomUUID } from 'node:crypto';
import pg from 'pg';

export const tenant = 'acme';
export const newConversation = () => randomUUID();

const pools = [];
export function pool(url = process.env.MNEME_APP_URL, max = 4) {
  if (!url) throw new Error('MNEME_APP_URL is not set: run these tests through go test ./tests -run TestTypeScriptClient');
  const p = new pg.Pool({ connectionString: url, max });
  pools.push(p);
  return p;
}
export const adminPool = () => pool(process.env.MNEME_ADMIN_URL, 2);
export const workerPool = () => pool(process.env.MNEME_WORKER_URL, 2);
export async function closeAll() {
  await Promise.all(pools.splice(0).map((p) => p.end()));
}
