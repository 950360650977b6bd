import type { Enum, Type } from 'protobufjs';
import { xdsRoot } from '../../../xds/protos.ts';

/** envoy.service.auth.v3 messages, looked up once (the xDS proto root loads on first use). */
export interface AuthProtos {
  readonly checkRequest: Type;
  readonly checkResponse: Type;
  readonly struct: Type;
}

let cached: AuthProtos | undefined;

export function authProtos(): AuthProtos {
  if (cached) return cached;
  const root = xdsRoot();
  cached = {
    checkRequest: root.lookupType('envoy.service.auth.v3.CheckRequest'),
    checkResponse: root.lookupType('envoy.service.auth.v3.CheckResponse'),
    struct: root.lookupType('google.protobuf.Struct'),
  };
  return cached;
}

let statusEnum: Enum | undefined;

/** envoy.type.v3.StatusCode by name ("Unauthorized" → 401), undefined when unknown. */
export function statusCodeByName(name: string): number | undefined {
  statusEnum ??= xdsRoot().lookupEnum('envoy.type.v3.StatusCode');
  return statusEnum.values[name];
}
