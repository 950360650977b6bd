/**
 * `kubectl apply` / `kubectl delete` for an `--istio` directory: each document of the given files is
 * stored as its own file named by its identity (`<namespace>.<kind>.<name>.yaml`), so applying a
 * resource again replaces it and deleting removes it, whichever file it came from. `-n NS` sets the
 * namespace of documents that have none (as kubectl's does). Files are written atomically.
 *   skua-controlplane apply  --istio DIR [-n NS] FILE...
 *   skua-controlplane delete --istio DIR [-n NS] FILE...
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';

export interface Applied {
  readonly id: string;
  readonly file: string;
}

type Json = Record<string, unknown>;

/** The documents of a YAML text, each with the namespace it gets and the file it is stored in. */
export function splitResources(text: string, namespace?: string): Array<{ doc: Json; id: string; file: string }> {
  const out: Array<{ doc: Json; id: string; file: string }> = [];
  for (const d of parseAllDocuments(text)) {
    if (d.errors.length) throw new Error(`invalid YAML: ${d.errors[0].message}`);
    const doc = d.toJS() as Json | null;
    if (!doc || typeof doc !== 'object') continue;
    const md = (doc.metadata ?? {}) as Json;
    const kind = String(doc.kind ?? ''), name = String(md.name ?? '');
    if (!kind || !name) throw new Error(`a document without kind or metadata.name: ${JSON.stringify(doc).slice(0, 80)}`);
    const ns = String(md.namespace ?? namespace ?? 'default');
    doc.metadata = { ...md, namespace: ns };
    // The API group keeps Istio's Gateway and the Gateway API's apart.
    const group = String(doc.apiVersion ?? '').split('/').slice(0, -1).join('/') || 'core';
    out.push({ doc, id: `${kind} ${ns}/${name}`, file: `${ns}.${kind.toLowerCase()}.${group}.${name}.yaml` });
  }
  return out;
}

export function applyText(dir: string, text: string, namespace?: string): Applied[] {
  return splitResources(text, namespace).map(({ doc, id, file }) => {
    const path = join(dir, file);
    writeFileSync(`${path}.tmp`, stringify(doc));
    renameSync(`${path}.tmp`, path);
    return { id, file };
  });
}

export function deleteText(dir: string, text: string, namespace?: string): Applied[] {
  return splitResources(text, namespace).map(({ id, file }) => {
    rmSync(join(dir, file), { force: true });
    return { id, file };
  });
}

export function runApply(verb: 'apply' | 'delete', argv: readonly string[]): number {
  const { values, positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: { istio: { type: 'string' }, namespace: { type: 'string', short: 'n' }, filename: { type: 'string', short: 'f', multiple: true } } });
  const files = [...(values.filename ?? []), ...positionals];
  if (!values.istio || files.length === 0) {
    process.stderr.write(`usage: skua-controlplane ${verb} --istio DIR [-n NAMESPACE] FILE...\n`);
    return 2;
  }
  try {
    for (const f of files) {
      const done = (verb === 'apply' ? applyText : deleteText)(values.istio, readFileSync(f, 'utf8'), values.namespace);
      for (const r of done) process.stdout.write(`${r.id} ${verb === 'apply' ? 'configured' : 'deleted'}\n`);
    }
    return 0;
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
}
