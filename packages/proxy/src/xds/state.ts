/** What the config layer remembers per resource for /config_dump: accepted versions and refusals. */
import { createHash } from 'node:crypto';
import { decodeAccepted } from './decode.ts';
import type { XdsRejection, XdsResource } from './types.ts';
import { sharedString } from '../core/shared-values.ts';

type Json = Record<string, unknown>;

/** One resource as /config_dump shows it. */
export interface TrackedResource {
  readonly version: string;
  readonly lastUpdated: number;
  readonly json: Json;
  /** A hash of the JSON, to skip updates that change nothing (Envoy compares hashes too). */
  readonly hash: string;
}

/**
 * A resource remembered as its protobuf bytes (one latin1 string: no objects for the GC to walk)
 * and decoded again when /config_dump reads it. 20,000 clusters and their assignments kept as
 * proto-JSON held ~2.5 KB of objects each.
 */
export class TrackedBytes implements TrackedResource {
  readonly version: string;
  readonly lastUpdated: number;
  readonly hash: string;
  private readonly typeUrl: string;
  private readonly bytes: string;

  constructor(typeUrl: string, value: Uint8Array, version: string, hash: string) {
    // Each resource decodes its own copy of its type URL: one string per type, not 80 B per resource.
    this.typeUrl = sharedString(typeUrl);
    this.bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('latin1');
    this.version = version;
    this.lastUpdated = Date.now();
    this.hash = hash;
  }

  get json(): Json {
    return decodeAccepted({ type_url: this.typeUrl, value: Buffer.from(this.bytes, 'latin1') });
  }
}


/** A hash of what a resource says: of its bytes when it came over ADS (cheaper than its JSON). */
export function resourceHash(r: XdsResource): string {
  const h = createHash('sha1');
  if (r.any) h.update(r.any.value); else h.update(JSON.stringify(r.json));
  return h.digest('base64');
}

/** How the config layer remembers an accepted resource: its bytes when it has them, else its JSON (or nothing, on workers). */
export function track(r: XdsResource, version: string, hash: string, retain: boolean): TrackedResource {
  if (retain && r.any) return new TrackedBytes(r.any.type_url, r.any.value, version, hash);
  return { version, lastUpdated: Date.now(), json: retain ? r.json : NO_CONFIG, hash };
}

const NO_CONFIG: Json = Object.freeze({});

export interface ErrorState {
  readonly json: Json;
  readonly details: string;
  readonly time: number;
}

/** The last refusal per type and resource name (config_dump's error_state), until it is accepted. */
export class ErrorLog {
  readonly byType = new Map<string, Map<string, ErrorState>>();

  record(typeUrl: string, name: string, json: Json, details: string): void {
    let m = this.byType.get(typeUrl);
    if (!m) { m = new Map(); this.byType.set(typeUrl, m); }
    m.set(name, { json, details, time: Date.now() });
  }

  /** Records the refusal and adds it to the NACK. */
  reject(typeUrl: string, name: string, json: Json, message: string, out: XdsRejection[]): void {
    out.push({ name, message });
    this.record(typeUrl, name, json, message);
  }

  clear(typeUrl: string, name: string): void {
    this.byType.get(typeUrl)?.delete(name);
  }
}
