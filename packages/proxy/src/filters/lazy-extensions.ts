/**
 * Filter extensions loaded on first use. A filter module (and what it pulls in: gRPC, protobufjs,
 * undici, …) is loaded only when a config names its type URL or legacy name, so an idle proxy holds
 * only the filters its config uses (issue 13). Loading is synchronous (require of an ES module) because
 * config compilation is; it happens while a config is compiled, never on the request path.
 */

/** Where one extension lives: its keys, known without loading it, and how to load it. */
export interface LazyExtension<T> {
  readonly typeUrl: string;
  readonly legacyName: string;
  readonly load: () => T;
}

/** A by-key view of the extensions (the part of ReadonlyMap the config compilers use). */
export interface ExtensionLookup<T> {
  get(key: string): T | undefined;
}

/** By type URL and by legacy name; each extension is loaded once, when first asked for. */
export function lazyExtensionTables<T>(entries: readonly LazyExtension<T>[]): { byUrl: ExtensionLookup<T>; byName: ExtensionLookup<T> } {
  const loaded = new Map<LazyExtension<T>, T>();
  const resolve = (e: LazyExtension<T> | undefined): T | undefined => {
    if (!e) return undefined;
    let ext = loaded.get(e);
    if (ext === undefined) { ext = e.load(); loaded.set(e, ext); }
    return ext;
  };
  const byUrl = new Map(entries.map((e) => [e.typeUrl, e]));
  const byName = new Map(entries.map((e) => [e.legacyName, e]));
  return { byUrl: { get: (key) => resolve(byUrl.get(key)) }, byName: { get: (key) => resolve(byName.get(key)) } };
}
