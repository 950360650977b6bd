/**
 * @skua/proxy/core — what every program built on the core needs: config errors that name the
 * field, the protobuf-JSON reader, logging (component loggers, Envoy/Istio log formats, one-line
 * errors), drain, stats, Go durations, the one IPv4-mapped-address canonicaliser, and node:http's
 * createServer / STATUS_CODES without its ESM namespace (which loads Node's bundled undici). Re-exports only; nothing inside the proxy imports this file.
 */
export { ConfigError } from '../core/errors.ts';
export { Msg } from '../config/fields.ts';
export { normalizeKeys } from '../config/normalize.ts';
export { log, logger, setLogLevel, logLevel, setLogFormat, applyLogFlags, type Level, type Logger, type Component } from '../core/log.ts';
export { ISTIO_LOG_FORMAT, ISTIO_JSON_LOG_FORMAT } from '../core/log-format.ts';
export { explainError } from '../core/explain-error.ts';
export { parseGoDuration } from '../tls/identity-env.ts';
export { DrainManager, NEVER_DRAIN, type DrainStrategy } from '../core/drain.ts';
export { StatsStore, Counter, Gauge, Histogram } from '../stats/store.ts';
export { canonicalIp, canonicalIpText } from '../core/canonical-ip.ts';
export { formatHostPort } from '../config/address.ts';
export { createServer as createHttpServer, STATUS_CODES } from '../core/node-http.ts';
export {
  isIp, isLoopback, sameIp, parseCidrText, parseCidrRange, contains, CidrTable, parseIpInto, formatWords, type CidrRange, type IpFamily,
} from '../core/cidr.ts';
