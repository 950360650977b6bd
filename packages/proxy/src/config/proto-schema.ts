/**
 * Field names and message types of Envoy's .proto files, read lazily by package, for checking a
 * bootstrap's field names (config/strict.ts). A small scanner instead of protobufjs: a static
 * proxy checks its bootstrap once at start-up, and building protobufjs reflection for the ~60
 * files bootstrap.proto imports grew its RSS by 16 MB for good; names only cost ~7 MB (measured
 * at /ready on a static bootstrap). Options, services and extensions are skipped; packages are directories, as in
 * Envoy's API tree, so an extension's package is read the first time its type is asked for.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { FieldSchema, MessageSchema } from './strict.ts';
import { packageFiles, protoDirs } from '../xds/proto-dirs.ts';

/**
 * protobufjs's bundled well-known types (JSON descriptors by file), without the rest of protobufjs
 * (~45 modules, issue 13): the same object protobufjs exports as `common`.
 */
const wellKnownTypes = createRequire(import.meta.url)('protobufjs/src/common.js') as Record<string, { nested?: unknown } | undefined>;

interface RawField { readonly name: string; readonly type: string; readonly map: boolean; readonly repeated: boolean }
interface RawMessage { readonly scope: string; readonly fields: Map<string, RawField> }

const SCALARS = new Set(['double', 'float', 'int32', 'int64', 'uint32', 'uint64', 'sint32', 'sint64',
  'fixed32', 'fixed64', 'sfixed32', 'sfixed64', 'bool', 'string', 'bytes']);
/** Imported only for options, which are skipped. */
const OPTIONS_ONLY = /^(validate\/|udpa\/annotations\/|xds\/annotations\/|envoy\/annotations\/|google\/protobuf\/descriptor\.proto$)/;
const TOKEN = /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\/\/[^\n]*|\/\*[\s\S]*?\*\/|[A-Za-z_.][\w.]*|[{}[\]()<>;=,]|[^\s{}[\]()<>;=,"']+/g;

export class ProtoSchemas {
  private readonly includes: readonly string[];
  /** Package directories (relative) whose files are read when a type in them is asked for. */
  private readonly lazyRoots: readonly string[];
  private readonly messages = new Map<string, RawMessage>();
  private readonly enums = new Set<string>();
  private readonly files = new Set<string>();
  private readonly triedDirs = new Set<string>();
  private readonly schemas = new Map<string, MessageSchema>();

  constructor(includes: readonly string[], lazyRoots: readonly string[]) {
    this.includes = includes;
    this.lazyRoots = lazyRoots;
    for (const [file, json] of Object.entries(wellKnownTypes)) {
      if (file.startsWith('google/protobuf/') && json && typeof json === 'object') this.addJson('', json.nested);
      this.files.add(file);
    }
  }

  /** Reads a file (relative to the include roots) and what it imports. */
  load(rel: string): void {
    if (this.files.has(rel) || OPTIONS_ONLY.test(rel)) return;
    this.files.add(rel);
    const path = this.includes.map((inc) => join(inc, rel)).find((p) => existsSync(p));
    if (!path) return; // deprecated v2 imports the package does not ship: their types stay unknown
    const imports = this.scan(readFileSync(path, 'utf8'));
    for (const i of imports) this.load(i);
  }

  /** The message called `fullName` (`envoy.config.cluster.v3.Cluster`), reading its package if needed. */
  message(fullName: string): MessageSchema | null {
    let s = this.schemas.get(fullName);
    if (s) return s;
    if (!this.messages.has(fullName)) this.loadPackageOf(fullName);
    if (!this.messages.has(fullName)) return null;
    s = this.schemaOf(fullName);
    return s;
  }

  /** Proto field names of a loaded message (tests compare them with protobufjs's). */
  fieldNames(fullName: string): string[] {
    const names = new Set<string>();
    for (const f of this.messages.get(fullName)?.fields.values() ?? []) names.add(f.name);
    return [...names];
  }

  private loadPackageOf(fullName: string): void {
    for (const files of packageFiles(fullName, this.lazyRoots, this.triedDirs)) {
      for (const f of files) this.load(f);
      if (this.messages.has(fullName)) return;
    }
  }

  private schemaOf(fullName: string): MessageSchema {
    const raw = this.messages.get(fullName)!;
    const resolved = new Map<string, FieldSchema | null>();
    const schema: MessageSchema = {
      fullName,
      field: (key) => {
        let f = resolved.get(key);
        if (f !== undefined) return f ?? undefined;
        const rf = raw.fields.get(key);
        f = rf ? { message: this.resolve(rf.type, raw.scope), map: rf.map, repeated: rf.repeated } : null;
        resolved.set(key, f);
        return f ?? undefined;
      },
    };
    this.schemas.set(fullName, schema);
    return schema;
  }

  /** A field's type name → its message schema; null for scalars, enums and unknown types. */
  private resolve(type: string, scope: string): MessageSchema | null {
    if (SCALARS.has(type)) return null;
    if (type.startsWith('.')) return this.messages.has(type.slice(1)) ? this.schemaOf(type.slice(1)) : null;
    const parts = scope.split('.');
    for (let n = parts.length; n >= 0; n--) {
      const candidate = n === 0 || scope === '' ? type : `${parts.slice(0, n).join('.')}.${type}`;
      if (this.messages.has(candidate)) return this.schemas.get(candidate) ?? this.schemaOf(candidate);
      if (this.enums.has(candidate)) return null;
      if (scope === '') break;
    }
    return null;
  }

  /** protobufjs's bundled well-known types (JSON descriptors). */
  private addJson(scope: string, nested: unknown): void {
    if (!nested || typeof nested !== 'object') return;
    for (const [name, def] of Object.entries(nested as Record<string, { fields?: Record<string, { type: string; rule?: string; keyType?: string }>; values?: unknown; nested?: unknown }>)) {
      const full = scope ? `${scope}.${name}` : name;
      if (def.fields) {
        const fields = new Map<string, RawField>();
        for (const [fname, f] of Object.entries(def.fields)) addField(fields, { name: fname, type: f.type, map: f.keyType !== undefined, repeated: f.rule === 'repeated' });
        this.messages.set(full, { scope: full, fields });
      } else if (def.values) {
        this.enums.add(full);
      }
      this.addJson(full, def.nested);
    }
  }

  /** Collects the messages and enums of one file; returns its imports. */
  private scan(source: string): string[] {
    const tokens: string[] = [];
    for (const m of source.matchAll(TOKEN)) if (!m[0].startsWith('//') && !m[0].startsWith('/*')) tokens.push(m[0]);
    const imports: string[] = [];
    let pkg = '';
    let i = 0;
    const skipStatement = (): void => {
      let depth = 0;
      for (; i < tokens.length; i++) {
        const t = tokens[i];
        if (t === '{' || t === '[' || t === '(') depth++;
        else if (t === '}' || t === ']' || t === ')') depth--;
        else if (t === ';' && depth === 0) break;
      }
      i++;
    };
    const skipBlock = (): void => { // from a keyword to the end of its { ... }
      while (i < tokens.length && tokens[i] !== '{') i++;
      let depth = 0;
      for (; i < tokens.length; i++) {
        if (tokens[i] === '{') depth++;
        else if (tokens[i] === '}' && --depth === 0) break;
      }
      i++;
    };
    const message = (scope: string): void => { // at `message`
      const full = scope ? `${scope}.${tokens[i + 1]}` : tokens[i + 1];
      const fields = new Map<string, RawField>();
      this.messages.set(full, { scope: full, fields });
      i += 3; // message Name {
      body(full, fields, '}');
    };
    const body = (full: string, fields: Map<string, RawField>, end: string): void => {
      while (i < tokens.length && tokens[i] !== end) {
        const t = tokens[i];
        if (t === 'message') message(full);
        else if (t === 'enum') { this.enums.add(`${full}.${tokens[i + 1]}`); skipBlock(); }
        else if (t === 'extend') skipBlock();
        else if (t === 'oneof') { i += 3; body(full, fields, '}'); }
        else if (t === 'option' || t === 'reserved' || t === 'extensions' || t === ';') skipStatement();
        else if (t === 'map') { // map < K , V > name = N [...] ;
          addField(fields, { name: tokens[i + 6], type: tokens[i + 4], map: true, repeated: false });
          skipStatement();
        } else {
          const label = t === 'repeated' || t === 'optional' || t === 'required' ? 1 : 0;
          addField(fields, { name: tokens[i + label + 1], type: tokens[i + label], map: false, repeated: t === 'repeated' });
          skipStatement();
        }
      }
      i++;
    };
    while (i < tokens.length) {
      const t = tokens[i];
      if (t === 'package') { pkg = tokens[i + 1]; skipStatement(); }
      else if (t === 'import') {
        const spec = tokens[i + 1] === 'public' || tokens[i + 1] === 'weak' ? tokens[i + 2] : tokens[i + 1];
        imports.push(spec.slice(1, -1));
        skipStatement();
      } else if (t === 'message') message(pkg);
      else if (t === 'enum') { this.enums.add(pkg ? `${pkg}.${tokens[i + 1]}` : tokens[i + 1]); skipBlock(); }
      else if (t === 'service' || t === 'extend') skipBlock();
      else skipStatement();
    }
    return imports;
  }
}

/** Envoy's and xDS's packages on demand, and Skua's Istio protos (a few small files) up front. */
export function envoySchemas(): ProtoSchemas {
  const { includes, lazyRoots, ownFiles } = protoDirs();
  const schemas = new ProtoSchemas(includes, lazyRoots);
  for (const f of ownFiles) schemas.load(f);
  return schemas;
}

/** Indexes a field by its proto name and its lowerCamel JSON name (Envoy takes both). */
function addField(fields: Map<string, RawField>, f: RawField): void {
  fields.set(f.name, f);
  fields.set(f.name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()), f);
}
