/** What the config layer remembers per resource for /config_dump: accepted versions and refusals. */
import type { XdsRejection } from './types.ts';

type Json = Record<string, unknown>;

/** One resource as /config_dump shows it. */
export interface TrackedResource {
  readonly version: string;
  readonly lastUpdated: number;
  readonly json: Json;
  /** A hash of the JSON, to skip updates that change nothing (Envoy compares hashes too). */
  readonly hash: string;
}

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
