// A minimal client for the hookhost daemon (`hookhost serve [--socket PATH]`), for Node.js
// 18+ with no dependencies. Requests on one connection run concurrently; answers are
// matched to their promises by id.
//
//   import { HookhostClient } from './hookhost-client.mjs';
//   const client = await HookhostClient.connect(defaultSocketPath());
//   const outcome = await client.dispatch('PreToolUse',
//     { session_id: 's1', tool_name: 'Bash', tool_input: { command: 'rm -rf /' } });
//   if (outcome.decision === 'deny') console.log('blocked:', outcome.reason);
//   client.close();
//
// Run it as a script for a quick check: `node hookhost-client.mjs [SOCKET]`.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Where `hookhost serve` listens without `--socket`: `$XDG_RUNTIME_DIR` when it is an
 * absolute directory, else the data directory. */
export function defaultSocketPath() {
  const runtime = process.env.XDG_RUNTIME_DIR ?? '';
  if (path.isAbsolute(runtime) && fs.statSync(runtime, { throwIfNoEntry: false })?.isDirectory()) {
    return path.join(runtime, 'hookhost.sock');
  }
  const data = process.env.HOOKHOST_DATA_DIR
    || path.join(process.env.XDG_DATA_HOME || path.join(os.homedir(), '.local/share'), 'hookhost');
  return path.join(data, 'hookhost.sock');
}

export class HookhostClient {
  #socket;
  #buffer = '';
  #nextId = 1;
  #pending = new Map();
  #listeners = new Map();

  constructor(socket) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => this.#receive(chunk));
    socket.on('close', () => {
      for (const { reject } of this.#pending.values()) reject(new Error('the daemon closed the connection'));
      this.#pending.clear();
    });
  }

  /** Connects to the daemon's unix socket. */
  static connect(path) {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(path, () => resolve(new HookhostClient(socket)));
      socket.once('error', reject);
    });
  }

  #receive(chunk) {
    this.#buffer += chunk;
    let newline;
    while ((newline = this.#buffer.indexOf('\n')) >= 0) {
      const line = this.#buffer.slice(0, newline);
      this.#buffer = this.#buffer.slice(newline + 1);
      if (!line.trim()) continue;
      const message = JSON.parse(line);
      if (message.session !== undefined && message.async !== undefined) {
        for (const listener of this.#listeners.get(message.session) ?? []) listener(message.async);
        continue;
      }
      const waiter = this.#pending.get(message.id);
      if (!waiter) continue;
      this.#pending.delete(message.id);
      if (message.error !== undefined) waiter.reject(new Error(message.error));
      else waiter.resolve(message);
    }
  }

  #request(message) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#socket.write(JSON.stringify({ id, ...message }) + '\n');
    });
  }

  /** Dispatches one event; resolves to its outcome. */
  async dispatch(event, input, project) {
    const answer = await this.#request(project === undefined ? { event, input } : { event, input, project });
    return answer.outcome;
  }

  /** Calls `listener(result)` for each async result of the session as it finishes. */
  async subscribe(session, listener) {
    if (!this.#listeners.has(session)) this.#listeners.set(session, []);
    this.#listeners.get(session).push(listener);
    await this.#request({ subscribe: session });
  }

  close() {
    this.#socket.end();
  }
}

async function main(argv) {
  if (argv.length > 1) {
    console.error('usage: node hookhost-client.mjs [SOCKET]');
    return 2;
  }
  const client = await HookhostClient.connect(argv[0] ?? defaultSocketPath());
  const commands = ['ls -la', 'rm -rf /'];
  // Both requests in flight at once.
  const outcomes = await Promise.all(commands.map((command) =>
    client.dispatch('PreToolUse', { session_id: 'node-client', tool_name: 'Bash', tool_input: { command } })));
  commands.forEach((command, i) =>
    console.log(JSON.stringify({ command, decision: outcomes[i].decision, reason: outcomes[i].reason })));
  try {
    await client.dispatch('NoSuchEvent', {});
  } catch (error) {
    console.log(JSON.stringify({ error: error.message }));
  }
  client.close();
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
