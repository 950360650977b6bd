import type { Msg } from '../../config/fields.ts';
import { readDataSource } from '../../config/data-source.ts';
import { compileHeaderValue } from '../../http/header-ops.ts';
import { FilterStateObject, parseIpPort, setFilterState, type FilterState, type StreamSharing } from '../../core/filter-state.ts';
import type { LogEntry } from '../../telemetry/log-entry.ts';

/**
 * Object factories Envoy registers by key (factory_key, else object_key): a plain string, or an
 * `ip:port` address that must parse (a value that does not is skipped, as Envoy's factory returns null).
 */
const STRING_FACTORIES = new Set(['envoy.string', 'envoy.tcp_proxy.cluster', 'envoy.upstream.dynamic_host', 'envoy.upstream.dynamic_port',
  'envoy.network.upstream_server_name', 'envoy.network.application_protocols', 'envoy.network.upstream_subject_alt_names',
  'envoy.network.network_namespace', 'envoy.hashable_string']);
const ADDRESS_FACTORIES = new Set(['envoy.network.transport_socket.original_dst_address', 'envoy.filters.listener.original_dst.local_ip',
  'envoy.filters.listener.original_dst.remote_ip']);
const SHARING = ['NONE', 'ONCE', 'TRANSITIVE'] as const;

/** One FilterStateValue compiled. */
export interface FilterStateValue {
  readonly key: string;
  readonly format: (e: LogEntry) => string;
  readonly address: boolean;
  readonly readOnly: boolean;
  readonly shared: StreamSharing;
  readonly skipIfEmpty: boolean;
}

export function compileFilterStateValues(list: Msg[]): FilterStateValue[] {
  return list.map((v) => {
    v.onlyFields(['object_key', 'factory_key', 'format_string', 'read_only', 'shared_with_upstream', 'skip_if_empty']);
    const key = v.requiredStr('object_key');
    const factory = v.str('factory_key') || key;
    const address = ADDRESS_FACTORIES.has(factory);
    if (!address && !STRING_FACTORIES.has(factory)) {
      throw v.error(v.has('factory_key') ? 'factory_key' : 'object_key', `'${factory}' does not have an object factory (use factory_key: envoy.string for a string)`);
    }
    return {
      key,
      format: compileSubstitutionText(v.requiredMsg('format_string')),
      address,
      readOnly: v.bool('read_only'),
      shared: v.enumOf('shared_with_upstream', SHARING),
      skipIfEmpty: v.bool('skip_if_empty'),
    };
  });
}

/**
 * A SubstitutionFormatString in text form (text_format or text_format_source). Empty command values
 * print '-' unless omit_empty_values, as in Envoy's text formatter.
 */
function compileSubstitutionText(m: Msg): (e: LogEntry) => string {
  for (const f of ['json_format', 'formatters', 'content_type']) if (m.has(f)) throw m.error(f, 'is not supported here (text formats only)');
  const omitEmpty = m.bool('omit_empty_values');
  let text: string;
  let field: string;
  if (m.has('text_format_source')) { text = readDataSource(m.requiredMsg('text_format_source')).toString(); field = m.field('text_format_source'); }
  else if (m.has('text_format')) { text = m.str('text_format'); field = m.field('text_format'); }
  else throw m.error('', 'one of text_format, text_format_source is required');
  // 'response' side: %REQ(x)% then reads the request through the entry, not the (empty) map given.
  const { literal, format } = compileHeaderValue(text, 'response', field);
  if (!format) return () => literal;
  const none = {};
  return omitEmpty ? (e) => format(none, e) : (e) => format(none, e) || '-';
}

/** Applies the values in order to `owner.filterState` (a read-only object already there is kept). */
export function applyFilterStateValues(values: readonly FilterStateValue[], entry: LogEntry, owner: { filterState: FilterState | undefined }): void {
  for (const v of values) {
    const value = v.format(entry);
    if (v.skipIfEmpty && (value === '' || value === '-')) continue;
    if (v.address && parseIpPort(value) === undefined) continue;
    setFilterState(owner, v.key, new FilterStateObject(value, v.shared, v.readOnly));
  }
}
