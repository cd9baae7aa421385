// Builds {{wasm_name}}.wasm with componentize-js's library API (the jco CLI's
// `componentize` fails under preview2-shim 0.26). Usage: node build.mjs [OUT.wasm]
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, '{{wasm_name}}.wasm'));
const { component } = await componentize({
  sourcePath: join(here, 'app.js'),
  witPath: join(here, 'wit'),
  worldName: 'plugin',
  disableFeatures: ['http', 'clocks', 'random'],
});
await writeFile(out, component);
console.log(`wrote ${out} (${component.length} bytes)`);
