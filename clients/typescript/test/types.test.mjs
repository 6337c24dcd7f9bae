// The hand-written .d.ts files against src/ and the frameworks' own types:
// tsc --noEmit compiles test/types-check.ts (strict).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

test('the .d.ts types compile against the frameworks (tsc --noEmit)', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const r = spawnSync('node_modules/.bin/tsc', ['-p', 'test/tsconfig.json'], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});
