// Builds protect_paths.wasm with componentize-js's library API
// (`npx jco componentize` fails under preview2-shim 0.26: its filesystem has no preopens).
// Usage: node build.mjs [OUT.wasm]   (default: ./protect_paths.wasm)
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, 'protect_paths.wasm'));
const { component } = await componentize({
  sourcePath: join(here, 'app.js'),
  witPath: resolve(here, '../../wit'),
  worldName: 'plugin',
  // No outgoing HTTP, clocks or randomness: the rules are a pure function. (stdio stays
  // so that console.log works; the host captures it.)
  disableFeatures: ['http', 'clocks', 'random'],
});
await writeFile(out, component);
console.log(`wrote ${out} (${component.length} bytes)`);
