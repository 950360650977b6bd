// Node 24 loads .ts as format 'module-typescript', which Jazzer.js's loader passes through
// uninstrumented. Strip the types here (same positions, so stack traces keep their lines) and call
// it 'module': Jazzer's hook, registered after this one, then instruments it.
import { stripTypeScriptTypes } from 'node:module';

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (result.format !== 'module-typescript') return result;
  const source = typeof result.source === 'string' ? result.source : Buffer.from(result.source).toString('utf8');
  return { ...result, format: 'module', source: stripTypeScriptTypes(source, { mode: 'strip' }) };
}
