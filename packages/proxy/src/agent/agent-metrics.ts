/**
 * The agent's own metrics on 15020 (pilot-agent's `istio_agent_*`): this process and its Node
 * runtime through prom-client's default collectors, scrape counts, and the DNS proxy's counters.
 * Values that live elsewhere as plain numbers are read at scrape time (collect()), so nothing
 * here runs per request or per query.
 */
import { Counter, Registry, collectDefaultMetrics } from 'prom-client';
import type { DnsProxy } from '../dns/server.ts';

export const AGENT_PREFIX = 'istio_agent_';

export interface AgentMetrics {
  readonly registry: Registry;
  readonly scrapes: Counter;
  readonly scrapeFailures: Counter<'type'>;
  /** Renders the agent's metrics in Prometheus text format 0.0.4. */
  render(): Promise<string>;
}

/** Counters mirrored from plain numbers at scrape time. */
function mirrored(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name, help, registers: [registry],
    collect() { this.reset(); const v = read(); if (v > 0) this.inc(v); },
  });
}

export function createAgentMetrics(dns: () => DnsProxy | undefined): AgentMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: AGENT_PREFIX });
  // Gauges named *_total (promtool flags them) that only sum the per-type series next to them.
  for (const n of ['active_handles_total', 'active_requests_total', 'active_resources_total']) registry.removeSingleMetric(`${AGENT_PREFIX}nodejs_${n}`);
  const scrapes = new Counter({ name: `${AGENT_PREFIX}scrapes_total`, help: 'The total number of scrapes.', registers: [registry] });
  const scrapeFailures = new Counter({
    name: `${AGENT_PREFIX}scrape_failures_total`, help: 'The total number of failed scrapes.', labelNames: ['type'] as const, registers: [registry],
  });
  mirrored(registry, `${AGENT_PREFIX}dns_requests_total`, 'Total number of DNS requests.', () => dns()?.counters.requests ?? 0);
  mirrored(registry, `${AGENT_PREFIX}dns_upstream_requests_total`, 'Total number of DNS requests forwarded to upstream.', () => dns()?.forwarder.upstreamQueries ?? 0);
  mirrored(registry, `${AGENT_PREFIX}dns_upstream_failures_total`, 'Total number of DNS failures.', () => dns()?.forwarder.upstreamFailures ?? 0);
  return { registry, scrapes, scrapeFailures, render: () => registry.metrics() };
}
