import { Msg } from './fields.ts';
import { extensionConfig, ExtensionConfigPending } from '../xds/ecds.ts';

const TYPED_STRUCTS = new Set(['type.googleapis.com/udpa.type.v1.TypedStruct', 'type.googleapis.com/xds.type.v3.TypedStruct']);

/** An extension's typed_config with TypedStruct unwrapped: the real type URL and its message. */
export interface TypedConfig {
  /** The extension's type URL ('' when there is no typed_config). */
  readonly url: string;
  /** The config message: the Any itself, or a TypedStruct's `value` (empty when it has none). */
  readonly msg: Msg | undefined;
  /** The outer type URL when the config came wrapped in a TypedStruct. */
  readonly wrapper: string;
}

export function readTypedConfig(owner: Msg, key = 'typed_config'): TypedConfig {
  const tc = owner.msg(key);
  if (!tc) return { url: '', msg: undefined, wrapper: '' };
  return unwrapAny(tc);
}

/** An Any (e.g. a typed_per_filter_config value) with TypedStruct unwrapped. */
export function unwrapAny(tc: Msg): TypedConfig & { msg: Msg } {
  const url = tc.str('@type');
  if (!TYPED_STRUCTS.has(url)) return { url, msg: tc, wrapper: '' };
  const inner = tc.requiredStr('type_url');
  const value = tc.raw.value ?? {};
  return { url: inner.includes('/') ? inner : `type.googleapis.com/${inner}`, msg: new Msg(value, tc.field('value')), wrapper: url };
}

/** How an unsupported extension is named in errors: the inner type, and the wrapper if any. */
export function describeTypedConfig(t: TypedConfig, legacyName: string): string {
  return t.wrapper ? `${t.url} (in ${t.wrapper})` : t.url || legacyName;
}

/**
 * A filter's config: its typed_config, or for `config_discovery` (ECDS) the extension config
 * delivered under the filter's name, else the discovery's default_config. Throws
 * ExtensionConfigPending when neither is there yet (the listener warms).
 */
export function readFilterConfig(f: Msg): TypedConfig {
  const cd = f.msg('config_discovery');
  if (!cd) return readTypedConfig(f);
  const source = cd.requiredMsg('config_source');
  if (!source.has('ads')) throw source.error('', 'only `ads: {}` config sources are supported for ECDS');
  const name = f.requiredStr('name');
  const allowed = cd.strList('type_urls');
  const delivered = extensionConfig(name);
  const typed = delivered?.typedConfig
    ? readTypedConfig(new Msg({ typed_config: delivered.typedConfig }, `ecds[${name}]`))
    : cd.has('default_config') ? readTypedConfig(cd, 'default_config') : undefined;
  if (!typed) throw new ExtensionConfigPending(f.field('config_discovery'), name);
  const outer = delivered?.typedConfig ? String(delivered.typedConfig['@type'] ?? '') : cd.requiredMsg('default_config').str('@type');
  if (allowed.length && !allowed.includes(outer) && !allowed.includes(typed.url)) {
    throw cd.error('type_urls', `the extension config ${name} is a ${typed.url}, not one of ${allowed.join(', ')}`);
  }
  return typed;
}
