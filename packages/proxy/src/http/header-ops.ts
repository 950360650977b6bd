import type { Msg } from '../config/fields.ts';

type HeaderMap = Record<string, string | string[] | undefined>;

const APPEND_ACTIONS = ['APPEND_IF_EXISTS_OR_ADD', 'ADD_IF_ABSENT', 'OVERWRITE_IF_EXISTS_OR_ADD', 'OVERWRITE_IF_EXISTS'] as const;
type AppendAction = (typeof APPEND_ACTIONS)[number];

interface HeaderAdd {
  readonly key: string;
  readonly value: string;
  readonly action: AppendAction;
  readonly keepEmpty: boolean;
}

/** Header additions and removals compiled once (request_headers_to_add / _to_remove and friends). */
export class HeaderOps {
  readonly adds: readonly HeaderAdd[];
  readonly removes: readonly string[];
  readonly empty: boolean;

  constructor(adds: readonly HeaderAdd[], removes: readonly string[]) {
    this.adds = adds;
    this.removes = removes;
    this.empty = adds.length === 0 && removes.length === 0;
  }

  apply(headers: HeaderMap): void {
    for (let i = 0; i < this.removes.length; i++) delete headers[this.removes[i]];
    for (let i = 0; i < this.adds.length; i++) {
      const a = this.adds[i];
      if (a.value === '' && !a.keepEmpty) continue;
      const cur = headers[a.key];
      switch (a.action) {
        case 'APPEND_IF_EXISTS_OR_ADD':
          headers[a.key] = cur === undefined ? a.value : Array.isArray(cur) ? [...cur, a.value] : [cur, a.value];
          break;
        case 'ADD_IF_ABSENT':
          if (cur === undefined) headers[a.key] = a.value;
          break;
        case 'OVERWRITE_IF_EXISTS_OR_ADD':
          headers[a.key] = a.value;
          break;
        case 'OVERWRITE_IF_EXISTS':
          if (cur !== undefined) headers[a.key] = a.value;
          break;
      }
    }
  }
}

export const NO_HEADER_OPS = new HeaderOps([], []);

/** Reads `<prefix>_headers_to_add` / `<prefix>_headers_to_remove` from a route config level. */
export function compileHeaderOps(m: Msg, prefix: 'request' | 'response'): HeaderOps {
  return compileHeaderOpsFrom(m, `${prefix}_headers_to_add`, `${prefix}_headers_to_remove`);
}

/** Header ops from any pair of fields (local reply mappers use `headers_to_add`). */
export function compileHeaderOpsFrom(m: Msg, addField: string, removeField: string): HeaderOps {
  const adds = m.list(addField).map(compileAdd);
  const removes = m.strList(removeField).map((h) => h.toLowerCase());
  return adds.length || removes.length ? new HeaderOps(adds, removes) : NO_HEADER_OPS;
}

function compileAdd(m: Msg): HeaderAdd {
  const h = m.requiredMsg('header');
  const key = h.requiredStr('key').toLowerCase();
  const value = h.has('raw_value') ? Buffer.from(h.str('raw_value'), 'base64').toString('latin1') : h.str('value');
  if (/%[A-Z_]+(\(.*?\))?%/.test(value.replace(/%%/g, ''))) {
    throw h.error('value', `header value formatters (${value}) are not supported yet`);
  }
  let action: AppendAction = 'APPEND_IF_EXISTS_OR_ADD';
  if (m.has('append_action')) action = m.enumOf('append_action', APPEND_ACTIONS);
  if (m.has('append')) {
    if (action !== 'APPEND_IF_EXISTS_OR_ADD') throw m.error('append', 'both append and append_action are set');
    action = m.bool('append') ? 'APPEND_IF_EXISTS_OR_ADD' : 'OVERWRITE_IF_EXISTS_OR_ADD';
  }
  // `%%` is Envoy's escape for a literal percent sign.
  return { key, value: value.replace(/%%/g, '%'), action, keepEmpty: m.bool('keep_empty_value') };
}
