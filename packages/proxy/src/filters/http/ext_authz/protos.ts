import type { Enum, Type } from 'protobufjs';
import { isEnum, isType, protoLookup } from '../../../xds/protos.ts';

/** envoy.service.auth.v3 messages, looked up once (their package loads on first use). */
export interface AuthProtos {
  readonly checkRequest: Type;
  readonly checkResponse: Type;
  readonly struct: Type;
}

let cached: AuthProtos | undefined;

export function authProtos(): AuthProtos {
  if (cached) return cached;
  cached = {
    checkRequest: protoType('envoy.service.auth.v3.CheckRequest'),
    checkResponse: protoType('envoy.service.auth.v3.CheckResponse'),
    struct: protoType('google.protobuf.Struct'),
  };
  return cached;
}

let statusEnum: Enum | undefined;

/** envoy.type.v3.StatusCode by name ("Unauthorized" → 401), undefined when unknown. */
export function statusCodeByName(name: string): number | undefined {
  if (!statusEnum) {
    const e = protoLookup('envoy.type.v3.StatusCode');
    if (!isEnum(e)) throw new Error('envoy.type.v3.StatusCode: no such enum in the xDS protos');
    statusEnum = e;
  }
  return statusEnum.values[name];
}

function protoType(name: string): Type {
  const t = protoLookup(name);
  if (!isType(t)) throw new Error(`${name}: no such message in the xDS protos`);
  return t;
}
