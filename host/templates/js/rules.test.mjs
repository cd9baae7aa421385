// Unit tests: `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decide } from './rules.mjs';

test('denies configured phrases only', () => {
  const bash = (command, config = null) => decide('PreToolUse', 'Bash', { command }, config);
  assert.notEqual(bash('sudo rm -rf / --no-preserve-root'), null);
  assert.equal(bash('rm -rf ./target'), null);
  assert.equal(decide('PreToolUse', 'Edit', { file_path: 'x' }, null), null);
  assert.notEqual(bash('make deploy', { deny: ['deploy'] }), null);
});

test('a bad config is an error', () => {
  assert.throws(() => decide('PreToolUse', 'Bash', { command: 'ls' }, { deny: 'x' }));
});
