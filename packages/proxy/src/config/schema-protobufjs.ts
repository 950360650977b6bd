/** protobufjs reflection (the xDS layer's descriptors) as the MessageSchema config/strict.ts checks against. */
import type { Type } from 'protobufjs';
import type { FieldSchema, MessageSchema } from './strict.ts';
import { typeForUrl } from '../xds/protos.ts';

/** The message a type URL names, from the full xDS descriptors. */
export function schemaForUrl(url: string): MessageSchema | null {
  const t = typeForUrl(url);
  return t ? protobufSchema(t) : null;
}

const schemas = new WeakMap<Type, MessageSchema>();

export function protobufSchema(type: Type): MessageSchema {
  let s = schemas.get(type);
  if (s) return s;
  const fields = new Map<string, FieldSchema>();
  const schema: MessageSchema = { fullName: type.fullName.replace(/^\./, ''), field: (key) => indexed().get(key) };
  // Built on first use: most types are never walked by name.
  const indexed = (): Map<string, FieldSchema> => {
    if (fields.size > 0 || type.fieldsArray.length === 0) return fields;
    for (const f of type.fieldsArray) {
      const rt = f.resolvedType;
      const message = rt !== null && 'fieldsArray' in rt ? protobufSchema(rt) : null;
      const fs = { message, map: f.map, repeated: f.repeated };
      fields.set(f.name, fs);
      fields.set(f.name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()), fs);
    }
    return fields;
  };
  schemas.set(type, schema);
  return schema;
}
